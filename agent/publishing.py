"""Publishing the agent's messages: Status, SealedSecrets, Heartbeat on the site's subjects.

Message ids are derived from what the message is about (a TCP's resourceVersion, a secret's
checksum, an intent's sequence), so a republish of the same observation is dropped by the
server's duplicate window while a real change always gets through.

Each site's messages go to its own stream, whose quota the hub sets (message size, count,
bytes). A publish over it raises ``common.bus.errors.QuotaExceeded`` naming the limit
(``max_msg_size``, ``max_payload``, ``max_msgs``, ``max_bytes``); callers log it and go on with
the other control planes (an update of a subject already stored still fits a full stream).
"""

from __future__ import annotations

import hashlib

from common import bus
from protocol import messages, subjects


class Publisher:
    def __init__(self, conn: bus.Connection, *, site: str, prefix: str = subjects.DEFAULT_PREFIX) -> None:
        self.conn = conn
        self.site = site
        self.prefix = prefix

    async def status(self, status: messages.Status, *, about: str) -> bus.Ack:
        """``about`` names the observation (e.g. the TCP's resourceVersion or the intent's sequence)."""
        subject = subjects.status(status.site, status.namespace, status.name, prefix=self.prefix)
        digest = _digest(
            status.phase,
            status.reason,
            status.message,
            status.version,
            str(status.endpoint),
            str(status.replicas),
            str(status.ready_replicas),
            str(status.observed_generation),
            str(status.intent_seq),
            status.owner_uid,
            status.secrets_checksum,
        )
        return await bus.publish(
            self.conn,
            subject,
            messages.encode(status),
            msg_id=f"status:{status.namespace}/{status.name}:{about}:{digest}",
        )

    async def sealed(self, sealed: messages.SealedSecrets, *, about: str) -> bus.Ack:
        subject = subjects.secret(sealed.site, sealed.namespace, sealed.name, prefix=self.prefix)
        key = f"{sealed.namespace}/{sealed.name}"
        msg_id = f"secret:{key}:{about}:{sealed.checksum[:16]}:{sealed.recipient_key_id}"
        return await bus.publish(self.conn, subject, messages.encode(sealed), msg_id=msg_id)

    async def heartbeat(self, beat: messages.Heartbeat) -> bus.Ack:
        subject = subjects.heartbeat(self.site, prefix=self.prefix)
        return await bus.publish(
            self.conn,
            subject,
            messages.encode(beat),
            msg_id=f"heartbeat:{self.site}:{beat.sent_at.isoformat()}",
        )


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]
