"""Starting a Kafka producer, with the one refusal users hit named for what it is.

An idempotent producer first asks the broker for a producer id (InitProducerId).
Brokers without that API (the Tansu test broker, some managed Kafkas) answer with an
error aiokafka reports as a bare `UnknownError`; no retry will change that answer,
and the fix is a setting, so it is raised as `BrokerRefused` saying which.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaError

IDEMPOTENCE_HINT = (
    "if the broker has no idempotent producer (Tansu, some managed Kafkas), set"
    " HOLONOGRAPH_KAFKA_IDEMPOTENCE=false or pass --no-kafka-idempotence"
)


class BrokerRefused(KafkaError):  # type: ignore[misc]
    """The broker answered, and refused what this configuration asks of it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})"


async def start_producer(producer: AIOKafkaProducer, bootstrap: str, idempotence: bool) -> None:
    """`producer.start()`; an unreachable broker raises as before, an idempotent producer
    the broker refuses raises `BrokerRefused`. A producer that failed to start is stopped."""
    try:
        await producer.start()
    except BaseException as err:
        await producer.stop()
        if (
            idempotence
            and isinstance(err, KafkaError)
            and not isinstance(err, KafkaConnectionError)
        ):
            raise BrokerRefused(
                f"the Kafka broker at {bootstrap} refused an idempotent producer"
                f" (InitProducerId: {type(err).__name__})",
                IDEMPOTENCE_HINT,
            ) from err
        raise
