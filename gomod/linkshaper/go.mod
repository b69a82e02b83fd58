// Builds linkshaper (main.go beside this file): tc netem's delay, jitter and loss for a site's
// link on a kernel without netem, through NFQUEUE with github.com/florianl/go-nfqueue.
module kamaji-broker.local/gomod/linkshaper

go 1.26.0

require (
	github.com/florianl/go-nfqueue/v2 v2.0.0
	github.com/mdlayher/netlink v1.7.2
)

require (
	github.com/google/go-cmp v0.6.0 // indirect
	github.com/josharian/native v1.1.0 // indirect
	github.com/mdlayher/socket v0.4.1 // indirect
	golang.org/x/net v0.25.0 // indirect
	golang.org/x/sync v0.7.0 // indirect
	golang.org/x/sys v0.20.0 // indirect
)
