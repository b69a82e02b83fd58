"""One cluster's state: the objects, their history and what a write does to them.

store       the objects of every resource, the resourceVersion counter, the verbs
admission   what a write does to an object before it is stored: identity, metadata, rules, schema
metadata    the metadata the apiserver maintains on writes: names, uid, timestamps, generation
collecting  the cluster's background controllers (garbage collection, namespace and CRD
            cleanup), run synchronously after each write
listing     consistent lists at a resourceVersion, in pages
watching    the change log: a bounded history window and the live watchers it feeds
owners      who owns whom: the index of uids and ownerReferences
objects     small shared facts about stored objects: well-known keys, timestamps, private copies
selectors   label and field selectors: parse, match
"""
