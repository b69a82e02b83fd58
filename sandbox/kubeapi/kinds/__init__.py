"""The kinds the emulator serves and what a custom object is checked against. Pure.

resources   resource types: the built-ins, and those read from CRDs
schema      structural OpenAPI v3 schemas of CustomResourceDefinitions: validation
formats     string formats and patterns as the apiextensions-apiserver checks them
pruning     pruning and defaulting of custom objects by their structural schema
validating  what a write of a custom resource is checked against, in the real server's order
discovery   discovery documents: /version, /api, /api/v1, /apis, /apis/<group>[/<version>]
tables      server-side printing: Table responses for ``kubectl get``
"""
