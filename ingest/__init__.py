"""The ingest path, in data-flow order: receive (grpc_server, http_server) -> decode ->
validate -> export -> hand-off (embedded batcher or Kafka) -> sink -> store."""
