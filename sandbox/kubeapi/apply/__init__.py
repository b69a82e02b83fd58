"""Patches and server-side apply on plain objects. Pure.

fieldsets      managedFields as stored: one entry per manager, operation and subresource
managedfields  which field manager owns which fields, and server-side apply on top of it
patching       JSON merge patch and JSON patch, as kube-apiserver applies them
"""
