"""The receiver edge: what a request goes through before and after the export path.

    http_server.ConnectionTable admit the connection (caps in all and per address;
                                past one, shed one that sent nothing or no token)
    grpc_server / http_server   the transports: bytes in, answer out
        └─► steps.Edge          authenticate (auth) -> the principal's reading turn
                                (admission.ReadGate) -> read within the body timeout
                                and the minimum rate -> admit its memory cost, bytes
                                and spans (admission) -> parse -> tenant rate limit
                                (ratelimit) -> export (ingest.export.handler)
        ◄── answers             outcome -> OTLP response; error -> gRPC code / HTTP
                                status, and the fixed reason it is counted under

`tls` serves both listeners' certificates, rotated without a restart.
"""
