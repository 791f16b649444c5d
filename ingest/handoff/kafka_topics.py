"""Create the topics when absent and learn the message limit they enforce.

Topics are created with the configured partition count, replication factor and
`max.message.bytes`; an existing topic is left as it is, and its own
`max.message.bytes` (when the broker reports it) caps what the producer packs.
"""

from __future__ import annotations

import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from schemas.topics import Topics

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36


async def ensure_topics(
    bootstrap: str, topics: Topics, max_message_bytes: int, timeout_ms: int, client_id: str
) -> int:
    """Create missing topics; returns the smallest message limit in force (bytes)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms, client_id=client_id
    )
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(
                name,
                topics.partitions,
                topics.replication_factor,
                topic_configs={"max.message.bytes": str(max_message_bytes)},
            )
            for name in topics.all()
            if name not in existing
        ]
        if missing:
            response = await admin.create_topics(missing)
            for name, code, message in response.topic_errors:
                if code not in (0, TOPIC_ALREADY_EXISTS):
                    raise RuntimeError(f"cannot create topic {name}: {message} (error {code})")
                if code == 0:
                    log.info("created topic %s (%d partitions)", name, topics.partitions)
        return min(max_message_bytes, await _topic_limit(admin, topics, max_message_bytes))
    finally:
        await admin.close()


async def _topic_limit(admin: AIOKafkaAdminClient, topics: Topics, default: int) -> int:
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in topics.all()]
    try:
        responses = await admin.describe_configs(resources)
    except Exception as err:  # not every broker answers; the configured limit stands
        log.info("describe_configs failed (%s); using max_message_bytes=%d", err, default)
        return default
    limits = [default]
    for response in responses:
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] == "max.message.bytes" and str(entry[1]).isdigit():
                    limits.append(int(entry[1]))
    return min(limits)
