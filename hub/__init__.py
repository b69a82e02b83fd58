"""hub package."""
