"""The receiver edge: what a request goes through before and after the export path.

    grpc_server / http_server   the transports: bytes in, answer out
        └─► steps.Edge          authenticate (auth) -> reading turn (admission.ReadGate)
                                -> read within the body timeout -> admit its memory
                                cost (admission) -> parse -> tenant rate limit
                                (ratelimit) -> export (ingest.export.handler)
        ◄── answers             outcome -> OTLP response; error -> gRPC code / HTTP status

`tls` serves both listeners' certificates, rotated without a restart.
"""
