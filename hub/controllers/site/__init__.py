"""The Site controller and what belongs to a Site.

controller   the Site status writer
credentials  operator mode: the Site's finalizer, and revoking its agent when it is deleted
bootstrap    operator mode: a new Site's bootstrap Secret, until its agent used it
placements   may this namespace place there

Its pure core is ``hub.reconcile.site``.
"""
