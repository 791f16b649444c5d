"""The report job: one self-contained HTML page with what the dashboards show, for the
embedded default where no Grafana runs.

gather.py  reads: completeness, quarantine, hourly pass rates, stored drift runs and
           variance verdicts, and the compare job per surface
  -> html.py  the page: inline CSS and SVG, no script, nothing fetched
"""
