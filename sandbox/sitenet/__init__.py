"""A site's own network: a Linux network namespace joined to this machine by a veth pair.

plan        pure: which addresses a namespace gets (a /24 for the link, a /24 for its Services),
            its names, and which of this machine's routes it must not overlap
namespace   Namespace: create it (``ip netns``, a veth pair, a route), run commands in it, give
            it more addresses and host names, delete it
shape       pure: what a link does to its packets, one direction at a time (delay, jitter,
            loss, down), and the lines ``linkshaper`` reads and answers
link        Link: a namespace's link shaped by ``linkshaper`` (NFQUEUE, where the kernel has no
            tc netem): delayed, lossy, one way or cut, and healed

Why: a site of the real backend runs the real Kamaji operator, whose webhook port (9443) is
fixed, and a tenant API server per control plane at the address Kamaji reports; each site in a
namespace of its own lets two sites (and two test runs side by side) keep their ports and
addresses apart, and the tenant addresses are routed to it from this machine. Needs root (the
tests and CI run as root); nothing listens outside this machine: the namespaces and the routes
to them are its own.
"""

from sandbox.sitenet.link import Link
from sandbox.sitenet.namespace import Namespace, NetnsError
from sandbox.sitenet.plan import Plan
from sandbox.sitenet.shape import CLEAR, DOWN, Counts, LinkError, Shape

__all__ = ["CLEAR", "DOWN", "Counts", "Link", "LinkError", "Namespace", "NetnsError", "Plan", "Shape"]
