"""The long-running services: build the stages, start them in order, stop them in reverse.

config       typed settings of `serve`, `sink` and `replay`'s Kafka side
receiver     `serve`: edge -> export -> hand-off (embedded or Kafka)
sink         `sink`: Kafka -> sink -> store
admin        the loopback admin endpoint of a store's owner (admin_file: where it
             is published); /healthz, /readyz, /metrics
periodic     the jobs a service runs over its store (the one loop)
rejections   rejected spans and dead letters summarised on the log
memory, gctune   allocator and garbage-collector settings for throughput
"""
