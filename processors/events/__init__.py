"""Reading events back: the Guide's `GET /lens/events` (`processors.events.job`)."""
