"""`holonograph demo`: seeded, realistic traffic sent through OTLP to a running `serve`."""
