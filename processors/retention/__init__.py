"""A tenant's retention: shown, set, cleared (`processors.retention.job`)."""
