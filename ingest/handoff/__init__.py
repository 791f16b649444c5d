"""The hand-off: where a validated batch becomes durable before the client is answered.

protocol        the steps every caller takes (`Handoff`)
embedded        group commit into the store in-process (the default path);
                refused: spans the store refuses at commit become quarantine rows
kafka           publish to Kafka, answer once every record is acknowledged;
                kafka_packing: a batch -> records under the broker's message limit;
                kafka_topics, kafka_producer: the topics and the producer's start;
                kafka_metrics: the producer's metrics
"""
