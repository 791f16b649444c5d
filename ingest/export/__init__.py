"""The export path: one parsed request -> one validated batch -> the hand-off.

    decode (+ salvage)   body bytes -> PB2 request; a span the decoder cannot read
                         is kept aside, to be quarantined alone
    logs                 a logs request -> its GenAI evaluation results as spans
    request              every span of the request, for its `principal`:
        validate         one span -> event | emission | quarantine record
        domain           values the store can hold (times, widths, depth, finite)
        genai            GenAI evaluation results -> one event per operation, by contract
    fast                 the hot path: an all-valid request straight to rows (and the
                         models' JSON), no models; anything else goes to `request`
    handler              decode (off the loop unless small), hand off, answer once durable

Nothing here knows which hand-off (embedded or Kafka) the batch goes to.
"""
