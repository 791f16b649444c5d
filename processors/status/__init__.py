"""What the store knows, at a glance: `holonograph status` and GET /holonograph/status."""
