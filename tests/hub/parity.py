"""The KamajiControlPlane parity table: one row per field, run by test_mapping.py.

Each row is a KamajiControlPlane ``spec`` fragment, written as in the Kamaji CAPI provider's
API (an RKCP takes it unchanged, beside ``site``), and what the provider puts into the
TenantControlPlane ``spec`` for it (merged into the minimal TCP of test_mapping's ``expected``).
``tests/hub/mapping/test_tcp.py`` checks the mapping gives it, and that the site's API server,
carrying Kamaji's real CRD, stores every field of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Row:
    id: str
    kcp: dict[str, Any]
    """KamajiControlPlane (= RKCP) spec fields."""
    tcp: dict[str, Any]
    """What they become in the TCP spec (deep-merged over the minimal one)."""
    cluster_network: dict[str, Any] = field(default_factory=dict)


RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
MOUNT = [{"name": "audit", "mountPath": "/etc/kubernetes/audit", "readOnly": True}]
CONTAINER = {
    "name": "audit-shipper",
    "image": "registry.example.com/shipper:1.0",
    "args": ["--dir=/var/log/audit"],
    "ports": [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}],
    "volumeMounts": [{"name": "audit-logs", "mountPath": "/var/log/audit"}],
}
INIT_CONTAINER = {"name": "wait-for-kms", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
VOLUMES = [
    {"name": "audit", "configMap": {"name": "audit-policy"}},
    {"name": "audit-logs", "emptyDir": {"sizeLimit": "1Gi"}},
    {"name": "kms", "secret": {"secretName": "kms-config", "defaultMode": 256}},
]


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, map by map (lists and scalars replace)."""
    out = dict(base)
    for key, value in changes.items():
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def _component(image: str, arg: str) -> dict[str, Any]:
    return {
        "extraArgs": [arg],
        "resources": RESOURCES,
        "extraVolumeMounts": MOUNT,
        "containerImageName": image,
    }


ROWS = [
    Row(
        "replicas-and-version",
        {"replicas": 3, "version": "v1.32.1"},
        {"controlPlane": {"deployment": {"replicas": 3}}, "kubernetes": {"version": "v1.32.1"}},
    ),
    Row(
        "kubelet",
        {"kubelet": {"cgroupfs": "cgroupfs", "preferredAddressTypes": ["InternalIP", "Hostname"]}},
        {
            "kubernetes": {
                "kubelet": {"cgroupfs": "cgroupfs", "preferredAddressTypes": ["InternalIP", "Hostname"]}
            }
        },
    ),
    Row(
        "admissionControllers",
        {"admissionControllers": ["LimitRanger", "ResourceQuota"]},
        {"kubernetes": {"admissionControllers": ["LimitRanger", "ResourceQuota"]}},
    ),
    Row(
        "network-serviceType-serviceAddress-advertiseAddress-serviceLabels-serviceAnnotations",
        {
            "network": {
                "serviceType": "NodePort",
                "serviceAddress": "192.0.2.10",
                "advertiseAddress": "192.0.2.11",
                "serviceLabels": {"team": "a"},
                "serviceAnnotations": {"example.com/lb": "internal"},
            }
        },
        {
            "controlPlane": {
                "service": {
                    "serviceType": "NodePort",
                    "additionalMetadata": {
                        "labels": {"team": "a"},
                        "annotations": {"example.com/lb": "internal"},
                    },
                }
            },
            "networkProfile": {"address": "192.0.2.10", "advertiseAddress": "192.0.2.11"},
        },
    ),
    Row(
        "addons-kubeProxy-konnectivity",
        {"addons": {"kubeProxy": {}, "konnectivity": {"server": {"port": 8132}}}},
        {"addons": {"kubeProxy": {}, "konnectivity": {"server": {"port": 8132}}}},
    ),
    Row(
        "cluster-network-apiServerPort-dual-stack-cidrs-serviceDomain",
        {},
        {
            "networkProfile": {
                "port": 6444,
                "serviceCidr": "10.96.0.0/16",
                "serviceCidrs": ["10.96.0.0/16", "fd00:10:96::/112"],
                "podCidr": "10.244.0.0/16",
                "podCidrs": ["10.244.0.0/16", "fd00:10:244::/56"],
                "clusterDomain": "tenant.local",
            }
        },
        {
            "apiServerPort": 6444,
            "services": {"cidrBlocks": ["10.96.0.0/16", "fd00:10:96::/112"]},
            "pods": {"cidrBlocks": ["10.244.0.0/16", "fd00:10:244::/56"]},
            "serviceDomain": "tenant.local",
        },
    ),
    Row(
        "registry",
        {"registry": "registry.example.com/k8s"},
        {"controlPlane": {"deployment": {"registrySettings": {"registry": "registry.example.com/k8s"}}}},
    ),
    *(
        Row(
            f"{key}-extraArgs-resources-extraVolumeMounts-containerImageName",
            {key: _component(f"{image}-fips", "--v=2")},
            {
                "controlPlane": {
                    "deployment": {
                        "extraArgs": {key: ["--v=2"]},
                        "resources": {key: RESOURCES},
                        "additionalVolumeMounts": {key: MOUNT},
                        "registrySettings": {f"{key}Image": f"{image}-fips"},
                    }
                }
            },
        )
        for key, image in (
            ("apiServer", "kube-apiserver"),
            ("controllerManager", "kube-controller-manager"),
            ("scheduler", "kube-scheduler"),
        )
    ),
    Row(
        "apiServer-extraArgs-for-an-external-cloud-controller-manager",
        {"apiServer": {"extraArgs": ["--cloud-provider=external"]}},
        {"controlPlane": {"deployment": {"extraArgs": {"apiServer": ["--cloud-provider=external"]}}}},
    ),
    Row(
        "kine-extraArgs-resources",
        {"kine": {"extraArgs": ["--metrics-bind-address=:9090"], "resources": RESOURCES}},
        {
            "controlPlane": {
                "deployment": {
                    "extraArgs": {"kine": ["--metrics-bind-address=:9090"]},
                    "resources": {"kine": RESOURCES},
                }
            }
        },
    ),
    Row(
        "dataStoreSchema-dataStoreUsername",
        {"dataStoreName": "postgres-a", "dataStoreSchema": "tenant_a", "dataStoreUsername": "tenant_a"},
        {"dataStore": "postgres-a", "dataStoreSchema": "tenant_a", "dataStoreUsername": "tenant_a"},
    ),
    Row(
        "dataStoreOverrides",
        {"dataStoreOverrides": [{"resource": "/events", "dataStore": "etcd-events"}]},
        {"dataStoreOverrides": [{"resource": "/events", "dataStore": "etcd-events"}]},
    ),
    Row(
        "network-ingress-host-added-to-certSANs",
        {
            "network": {
                "certSANs": ["cp1.example.com"],
                "ingress": {
                    "className": "nginx",
                    "hostname": "cp1.tenants.example.com:443",
                    "extraLabels": {"team": "a"},
                    "extraAnnotations": {"nginx.ingress.kubernetes.io/ssl-passthrough": "true"},
                },
            }
        },
        {
            "controlPlane": {
                "ingress": {
                    "hostname": "cp1.tenants.example.com:443",
                    "ingressClassName": "nginx",
                    "additionalMetadata": {
                        "labels": {"team": "a"},
                        "annotations": {"nginx.ingress.kubernetes.io/ssl-passthrough": "true"},
                    },
                }
            },
            "networkProfile": {"certSANs": ["cp1.example.com", "cp1.tenants.example.com"]},
        },
    ),
    Row(
        "network-ingress-minimal",
        {"network": {"ingress": {"hostname": "cp1.tenants.example.com"}}},
        {
            "controlPlane": {"ingress": {"hostname": "cp1.tenants.example.com"}},
            "networkProfile": {"certSANs": ["cp1.tenants.example.com"]},
        },
    ),
    Row(
        "network-gateway-host-added-to-certSANs",
        {
            "network": {
                "gateway": {
                    "name": "tenants",
                    "namespace": "gateways",
                    "hostname": "cp1.tenants.example.com:6443",
                    "sectionName": "kube-apiserver",
                    "port": 6443,
                    "extraLabels": {"team": "a"},
                    "extraAnnotations": {"example.com/route": "tls"},
                }
            }
        },
        {
            "controlPlane": {
                "gateway": {
                    "hostname": "cp1.tenants.example.com",
                    "parentRefs": [
                        {
                            "group": "gateway.networking.k8s.io",
                            "kind": "Gateway",
                            "name": "tenants",
                            "namespace": "gateways",
                            "sectionName": "kube-apiserver",
                            "port": 6443,
                        }
                    ],
                    "additionalMetadata": {
                        "labels": {"team": "a"},
                        "annotations": {"example.com/route": "tls"},
                    },
                }
            },
            "networkProfile": {"certSANs": ["cp1.tenants.example.com"]},
        },
    ),
    Row(
        "network-loadBalancerConfig",
        {
            "network": {
                "loadBalancerConfig": {
                    "loadBalancerClass": "example.com/internal",
                    "loadBalancerSourceRanges": ["192.168.1.0/24", "10.0.0.0/8"],
                }
            }
        },
        {
            "networkProfile": {
                "loadBalancerClass": "example.com/internal",
                "loadBalancerSourceRanges": ["192.168.1.0/24", "10.0.0.0/8"],
            }
        },
    ),
    Row(
        "network-dnsServiceIPs",
        {"network": {"dnsServiceIPs": ["10.96.0.10"]}},
        {"networkProfile": {"dnsServiceIPs": ["10.96.0.10"]}},
    ),
    Row(
        "addons-coreDNS-dnsServiceIPs-win-over-network",
        {
            "network": {"dnsServiceIPs": ["10.96.0.10"]},
            "addons": {"coreDNS": {"imageTag": "v1.11.3", "dnsServiceIPs": ["10.96.0.53", "fd00:10:96::a"]}},
        },
        {
            "addons": {"coreDNS": {"imageTag": "v1.11.3"}},
            "networkProfile": {"dnsServiceIPs": ["10.96.0.53", "fd00:10:96::a"]},
        },
    ),
    Row(
        "addons-coreDNS-without-dnsServiceIPs-clears-network-ones-as-the-provider-does",
        {"network": {"dnsServiceIPs": ["10.96.0.10"]}, "addons": {"coreDNS": {}}},
        {"addons": {"coreDNS": {}}},
    ),
    Row(
        "deployment-placement-nodeSelector-tolerations-affinity-topologySpreadConstraints-runtimeClassName",
        {
            "deployment": {
                "nodeSelector": {"node-role.example.com/control-planes": ""},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "cp", "effect": "NoSchedule"}
                ],
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "podAffinityTerm": {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {"matchLabels": {"kamaji.clastix.io/name": "cp1"}},
                                },
                            }
                        ]
                    }
                },
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"kamaji.clastix.io/name": "cp1"}},
                    }
                ],
                "runtimeClassName": "gvisor",
            }
        },
        {
            "controlPlane": {
                "deployment": {
                    "nodeSelector": {"node-role.example.com/control-planes": ""},
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "cp", "effect": "NoSchedule"}
                    ],
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "topologyKey": "kubernetes.io/hostname",
                                        "labelSelector": {"matchLabels": {"kamaji.clastix.io/name": "cp1"}},
                                    },
                                }
                            ]
                        }
                    },
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": {"kamaji.clastix.io/name": "cp1"}},
                        }
                    ],
                    "runtimeClassName": "gvisor",
                }
            }
        },
    ),
    Row(
        "deployment-serviceAccountName-strategy-additionalMetadata-podAdditionalMetadata",
        {
            "deployment": {
                "serviceAccountName": "tenant-cp",
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "additionalMetadata": {"labels": {"team": "a"}, "annotations": {"example.com/owner": "a"}},
                "podAdditionalMetadata": {"labels": {"tier": "cp"}},
            }
        },
        {
            "controlPlane": {
                "deployment": {
                    "serviceAccountName": "tenant-cp",
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                    },
                    "additionalMetadata": {
                        "labels": {"team": "a"},
                        "annotations": {"example.com/owner": "a"},
                    },
                    "podAdditionalMetadata": {"labels": {"tier": "cp"}},
                }
            }
        },
    ),
    Row(
        "deployment-extraInitContainers-extraContainers-extraVolumes",
        {
            "deployment": {
                "extraInitContainers": [INIT_CONTAINER],
                "extraContainers": [CONTAINER],
                "extraVolumes": VOLUMES,
            },
            "apiServer": {"extraVolumeMounts": MOUNT},
        },
        {
            "controlPlane": {
                "deployment": {
                    "additionalInitContainers": [INIT_CONTAINER],
                    "additionalContainers": [CONTAINER],
                    "additionalVolumes": VOLUMES,
                    "additionalVolumeMounts": {"apiServer": MOUNT},
                }
            }
        },
    ),
    Row(
        "deployment-container-ports-get-the-protocol-the-site-would-default",
        {"deployment": {"extraContainers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}},
        {
            "controlPlane": {
                "deployment": {
                    "additionalContainers": [
                        {"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}]}
                    ]
                }
            }
        },
    ),
    Row(
        "probes-of-the-deployment-and-each-component",
        {
            "deployment": {"probes": {"liveness": {"timeoutSeconds": 5, "failureThreshold": 6}}},
            "apiServer": {"probes": {"startup": {"periodSeconds": 20, "failureThreshold": 30}}},
            "controllerManager": {"probes": {"readiness": {"initialDelaySeconds": 3}}},
            "scheduler": {"probes": {"liveness": {"successThreshold": 1}}},
        },
        {
            "controlPlane": {
                "deployment": {
                    "probes": {
                        "liveness": {"timeoutSeconds": 5, "failureThreshold": 6},
                        "apiServer": {"startup": {"periodSeconds": 20, "failureThreshold": 30}},
                        "controllerManager": {"readiness": {"initialDelaySeconds": 3}},
                        "scheduler": {"liveness": {"successThreshold": 1}},
                    }
                }
            }
        },
    ),
    Row(
        "probes-of-one-component-alone-are-sent-unlike-the-provider",
        {"apiServer": {"probes": {"liveness": {"timeoutSeconds": 10}}}},
        {"controlPlane": {"deployment": {"probes": {"apiServer": {"liveness": {"timeoutSeconds": 10}}}}}},
    ),
    Row(
        "network-allocateLoadBalancerNodePorts",
        {"network": {"serviceType": "LoadBalancer", "allocateLoadBalancerNodePorts": False}},
        {
            "controlPlane": {
                "service": {"serviceType": "LoadBalancer", "allocateLoadBalancerNodePorts": False}
            }
        },
    ),
    Row(
        "network-additionalServicePorts-to-service-additionalPorts",
        {
            "network": {
                "additionalServicePorts": [
                    {"name": "csr-signer", "port": 9443, "targetPort": "signer"},
                    {
                        "name": "metrics",
                        "port": 9100,
                        "targetPort": 9100,
                        "protocol": "UDP",
                        "appProtocol": "http",
                    },
                ]
            }
        },
        {
            "controlPlane": {
                "service": {
                    "additionalPorts": [
                        {"name": "csr-signer", "port": 9443, "targetPort": "signer", "protocol": "TCP"},
                        {
                            "name": "metrics",
                            "port": 9100,
                            "targetPort": 9100,
                            "protocol": "UDP",
                            "appProtocol": "http",
                        },
                    ]
                }
            }
        },
    ),
    Row(
        "network-certSANs-hosts-wildcards-and-ips",
        {"network": {"certSANs": ["cp1.example.com", "*.tenants.example.com", "203.0.113.7", "fd00::7"]}},
        {
            "networkProfile": {
                "certSANs": ["cp1.example.com", "*.tenants.example.com", "203.0.113.7", "fd00::7"]
            }
        },
    ),
    Row(
        "empty-components-and-deployment-send-nothing",
        {"apiServer": {}, "kine": {}, "deployment": {"additionalMetadata": {}}, "dataStoreOverrides": []},
        {},
    ),
]


def _everything() -> Row:
    """The rows that do not exclude each other, as one KamajiControlPlane: no field hides another."""
    kcp: dict[str, Any] = {}
    tcp: dict[str, Any] = {}
    for row in ROWS:
        if row.id.startswith(
            (
                "network-gateway",
                "network-ingress-minimal",
                "apiServer-extraArgs-for",
                "addons-coreDNS-without",
                "empty-",
                "network-certSANs-",
                "cluster-network-",
            )
        ):
            continue  # a Gateway excludes an Ingress; the others replace a list another row sets
        kcp, tcp = merged(kcp, row.kcp), merged(tcp, row.tcp)
    cidrs = ["10.96.0.0/16", "fd00:10:96::/112"]
    tcp = merged(tcp, {"networkProfile": {"serviceCidr": cidrs[0], "serviceCidrs": cidrs}})
    return Row("everything-at-once", kcp, tcp, {"services": {"cidrBlocks": cidrs}})


ROWS.append(_everything())
