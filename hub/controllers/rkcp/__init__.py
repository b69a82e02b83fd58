"""The RemoteKamajiControlPlane controller: observe (reads only) → ``hub.reconcile.rkcp`` decides →
act → status.

controller     wiring its parts, and forgetting a deleted RKCP in one place
informing      RKCP, Cluster and Site watches
index          RKCPs by coordinates and owner
reconciling    one reconcile: observe → decide → act → status
acting         the actions carried out
published      the latest intent per subject and the fenced publish
surveying      the survey of the intent stream: what was written there behind the hub's back
purging        purging released deletions
infra          the InfraCluster's endpoint, any kind (discovery, read, merge patch)
writing        CAPI Secrets (open the kept or read box, write) and Events
checksums      CAPI Secret checksums from a watch
status_writes  at most one status patch per RKCP per second
own_writes     the hub's own writes the watch has not brought back yet
gauges         the metrics of the fleet: control planes by site and phase, Secrets behind,
               update-to-ready
"""
