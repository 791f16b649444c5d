"""The ingest path: an OTLP request becomes durable rows. Its stages, one sub-package
each, in the order a span passes them (which is also the order `ls` lists them):

    edge/      receive: TLS, bearer token -> Principal, read limits, admission, the
               gRPC and HTTP transports, the answer (partial success or status code)
    export/    parse the body, validate every span of the request -> ValidatedBatch
    handoff/   make it durable: group commit into the store (embedded), or Kafka
    sink/      Kafka -> store: consume, batch, dead-letter, write, commit last
    store/     ClickHouse: URLs, connections, rows, error classification, retention

    service/   the long-running processes (`serve`, `sink`) that wire the stages,
               their config, admin endpoint, metrics registry and periodic jobs

Beside the stages: `errors` (the exception tree every stage raises), `metrics`
(every Prometheus metric), `redact` (secrets never printed) and `replay`
(quarantine or dead letters through export and hand-off again).

`ingest` never imports `processors`, and no stage imports `service`.
"""
