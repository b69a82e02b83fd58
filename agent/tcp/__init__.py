"""TenantControlPlanes as the agent manages them: what the loops decide from. Pure.

managed      labels, the desired object, what is ours, drift
desires      the spec last applied to each TCP, what drift is measured from
fieldpaths   the spec fields it sets and compares (list items by index)
propagation  the RKCP's labels and annotations on the TCP, merged with others'
legacy       TCPs an older agent wrote, handed over to its server-side apply
"""
