"""What the benchmarks measure the broker against, in the bench's own process.

direct   one controller holding every site's kubeconfig (a control-plane provider's shape, or bare)
"""
