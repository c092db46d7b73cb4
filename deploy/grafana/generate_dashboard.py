#!/usr/bin/env python3
"""Generates deploy/grafana/fileserver.json (the Grafana dashboard).

  python3 deploy/grafana/generate_dashboard.py > deploy/grafana/fileserver.json

Edit panels here rather than in the JSON: scripts/check-deploy.sh fails when
the committed JSON differs from this script's output. Queries use the
variables $job and $instance and Grafana's $__rate_interval.
"""
import json
SEL = 'job=~"$job", instance=~"$instance"'
RI = '$__rate_interval'
panels = []
pid = [0]
def panel(title, desc, targets, x, y, w=12, h=8, kind="timeseries", unit="short", extra=None):
    pid[0] += 1
    p = {
        "id": pid[0], "type": kind, "title": title, "description": desc,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(65 + i), "expr": e, "legendFormat": l,
             "datasource": {"type": "prometheus", "uid": "${datasource}"}}
            for i, (e, l) in enumerate(targets)
        ],
    }
    if kind == "timeseries":
        p["options"] = {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max", "lastNotNull"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": "auto"}
    if extra:
        for k, v in extra.items():
            p["fieldConfig"]["defaults"][k] = v
    panels.append(p)

def row(title, y):
    pid[0] += 1
    panels.append({"id": pid[0], "type": "row", "title": title, "collapsed": False,
                   "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})

def thresholds(*steps):
    return {"thresholds": {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}}

# --- overview stats
row("Overview", 0)
panel("Targets up", "Scraped fileserver instances that answered the last scrape (up == 1).",
      [(f'sum(up{{{SEL}}})', "up")], 0, 1, w=4, h=4, kind="stat", extra=thresholds((None, "red"), (1, "green")))
panel("Serving", "Instances serving (fileserver_up = 1); 0 while one drains after SIGTERM (its /readyz answers 503).",
      [(f'sum(fileserver_up{{{SEL}}})', "serving")], 4, 1, w=4, h=4, kind="stat", extra=thresholds((None, "red"), (1, "green")))
panel("Requests/s", "All HTTP responses per second, every status code.",
      [(f'sum(rate(fileserver_http_requests_total{{{SEL}}}[{RI}]))', "req/s")], 8, 1, w=4, h=4, kind="stat", unit="reqps")
panel("Cache hit ratio", "Path-cache hits / (hits + misses); negative hits excluded. Alert below 80% (FileserverCacheHitRatioLow).",
      [(f'sum(rate(fileserver_cache_hits_total{{{SEL}}}[{RI}])) / (sum(rate(fileserver_cache_hits_total{{{SEL}}}[{RI}])) + sum(rate(fileserver_cache_misses_total{{{SEL}}}[{RI}])))', "hit ratio")],
      12, 1, w=4, h=4, kind="stat", unit="percentunit",
      extra={"min": 0, "max": 1, **thresholds((None, "red"), (0.8, "yellow"), (0.95, "green"))})
panel("5xx ratio", "Share of responses with a 5xx status. Alert above 1% (FileserverHigh5xxRate).",
      [(f'sum(rate(fileserver_http_requests_total{{{SEL}, code=~"5.."}}[{RI}])) / sum(rate(fileserver_http_requests_total{{{SEL}}}[{RI}]))', "5xx")],
      16, 1, w=4, h=4, kind="stat", unit="percentunit", extra=thresholds((None, "green"), (0.01, "red")))
panel("I/O backend", "The file I/O backend each instance runs (io_uring, or the blocking pool when io_uring is unavailable or denied by seccomp).",
      [(f'count by (backend) (fileserver_io_backend_info{{{SEL}}})', "{{backend}}")], 20, 1, w=4, h=4, kind="stat")

# --- HTTP
row("HTTP", 5)
panel("Request rate by status code", "Responses per second by status code (fileserver_http_requests_total).",
      [(f'sum by (code) (rate(fileserver_http_requests_total{{{SEL}}}[{RI}]))', "{{code}}")], 0, 6, unit="reqps")
panel("Latency quantiles", "Request duration quantiles from the fileserver_http_request_duration_seconds histogram (interpolated within its buckets), over all selected instances.",
      [(f'histogram_quantile({q}, sum by (le) (rate(fileserver_http_request_duration_seconds_bucket{{{SEL}}}[{RI}])))', f"p{int(q*100) if q*100 == int(q*100) else q*100}")
       for q in (0.5, 0.9, 0.99)] +
      [(f'sum(rate(fileserver_http_request_duration_seconds_sum{{{SEL}}}[{RI}])) / sum(rate(fileserver_http_request_duration_seconds_count{{{SEL}}}[{RI}]))', "mean")],
      12, 6, unit="s")
panel("Response body bytes/s", "Body bytes sent per second (fileserver_http_response_body_bytes_total), per instance.",
      [(f'sum by (instance) (rate(fileserver_http_response_body_bytes_total{{{SEL}}}[{RI}]))', "{{instance}}")], 0, 14, w=8, unit="Bps")
panel("Open connections", "Client connections open per instance (fileserver_connections_open).",
      [(f'fileserver_connections_open{{{SEL}}}', "{{instance}}"),
       (f'sum by (instance) (rate(fileserver_access_log_dropped_total{{{SEL}}}[{RI}]))', "access log lines dropped/s {{instance}}")], 8, 14, w=8)
panel("Requests by method, aborted", "Responses per second by method (GET, HEAD, other), and responses the client abandoned midway (fileserver_http_responses_aborted_total).",
      [(f'sum by (method) (rate(fileserver_http_requests_total{{{SEL}}}[{RI}]))', "{{method}}"),
       (f'sum(rate(fileserver_http_responses_aborted_total{{{SEL}}}[{RI}]))', "aborted")], 16, 14, w=8, unit="reqps")

# --- cache
row("Path cache", 22)
panel("Cache hit ratio", "Hits / (hits + misses) per instance. Each replica has its own cache: a new replica starts at 0 and warms up.",
      [(f'sum by (instance) (rate(fileserver_cache_hits_total{{{SEL}}}[{RI}])) / (sum by (instance) (rate(fileserver_cache_hits_total{{{SEL}}}[{RI}])) + sum by (instance) (rate(fileserver_cache_misses_total{{{SEL}}}[{RI}])))', "{{instance}}")],
      0, 23, unit="percentunit", extra={"min": 0, "max": 1})
panel("Cache lookups/s", "Outcome of path-cache lookups and maintenance per second. Unadmitted misses: first misses of a path while the cache is full, served without caching (its second miss caches it).",
      [(f'sum(rate(fileserver_cache_hits_total{{{SEL}}}[{RI}]))', "hits"),
       (f'sum(rate(fileserver_cache_misses_total{{{SEL}}}[{RI}]))', "misses"),
       (f'sum(rate(fileserver_cache_negative_hits_total{{{SEL}}}[{RI}]))', "negative hits"),
       (f'sum(rate(fileserver_cache_revalidations_total{{{SEL}}}[{RI}]))', "revalidations"),
       (f'sum(rate(fileserver_cache_evictions_total{{{SEL}}}[{RI}]))', "evictions"),
       (f'sum(rate(fileserver_cache_unadmitted_total{{{SEL}}}[{RI}]))', "unadmitted misses"),
       (f'sum(rate(fileserver_cache_invalidations_total{{{SEL}}}[{RI}]))', "invalidations")],
      12, 23, unit="ops")
panel("Cache entries", "Paths held in the cache per instance (fileserver_cache_entries).",
      [(f'fileserver_cache_entries{{{SEL}}}', "{{instance}}")], 0, 31)
panel("Contention by component", "Lock waits / CAS retries per second by component (fileserver_contention_total). Alert when the 5m rate is over twice the 1h rate and above 100/s.",
      [(f'sum by (component) (rate(fileserver_contention_total{{{SEL}}}[{RI}]))', "{{component}}")], 12, 31, unit="ops")

# --- descriptors
row("Descriptors", 39)
panel("Open fds vs budget", "Kernel descriptors held by the file manager against its budget, per instance. Alert above 90% (FileserverFdsNearBudget).",
      [(f'fileserver_fds_open{{{SEL}}}', "open {{instance}}"),
       (f'fileserver_fd_budget{{{SEL}}}', "budget {{instance}}"),
       (f'fileserver_fd_limit{{{SEL}}}', "RLIMIT_NOFILE {{instance}}")], 0, 40)
panel("Deferred release queue depth", "Dropped handles waiting for their shard owner or the reaper to close them (fileserver_deferred_release_queue_depth).",
      [(f'fileserver_deferred_release_queue_depth{{{SEL}}}', "{{instance}}")], 12, 40)
panel("Descriptor releases by path", "Releases per second: close = synchronous close in the caller, deferred = dropped handle drained by the owner/reaper.",
      [(f'sum by (path) (rate(fileserver_fd_releases_total{{{SEL}}}[{RI}]))', "{{path}}"),
       (f'sum(rate(fileserver_fd_allocations_total{{{SEL}}}[{RI}]))', "allocations")], 0, 48, unit="ops")
panel("Descriptor trouble", "Per second: stale-descriptor rejections, EMFILE recoveries (evict + retry), opens refused after recovery (answered 503), close(2) errors, reaper batches.",
      [(f'sum(rate(fileserver_fd_stale_total{{{SEL}}}[{RI}]))', "stale rejections"),
       (f'sum(rate(fileserver_fd_exhausted_total{{{SEL}}}[{RI}]))', "exhausted (503)"),
       (f'sum(rate(fileserver_fd_release_errors_total{{{SEL}}}[{RI}]))', "close errors"),
       (f'sum(rate(fileserver_emfile_recoveries_total{{{SEL}}}[{RI}]))', "EMFILE recoveries"),
       (f'sum(rate(fileserver_reaper_batches_total{{{SEL}}}[{RI}]))', "reaper batches")], 12, 48, unit="ops")
panel("Backend operations", "File-manager backend operations per second by kind (io_uring or blocking pool).",
      [(f'sum by (op) (rate(fileserver_backend_ops_total{{{SEL}}}[{RI}]))', "{{op}}")], 0, 56, unit="ops")
panel("File bytes read/s", "Bytes read from files by the backend (fileserver_read_bytes_total); sendfile bodies are not counted here.",
      [(f'sum by (instance) (rate(fileserver_read_bytes_total{{{SEL}}}[{RI}]))', "{{instance}}")], 12, 56, unit="Bps")

dash = {
    "uid": "fileserver",
    "title": "fileserver",
    "description": "HTTP traffic, path cache, contention and descriptors of the fileserver daemon (docs/operations.md explains each metric).",
    "tags": ["fileserver"],
    "timezone": "browser",
    "editable": True,
    "graphTooltip": 1,
    "schemaVersion": 39,
    "version": 1,
    "refresh": "30s",
    "time": {"from": "now-1h", "to": "now"},
    "annotations": {"list": [{
        "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
        "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}]},
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        {"name": "job", "label": "Job", "type": "query",
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": "label_values(fileserver_http_requests_total, job)", "refId": "job"},
         "definition": "label_values(fileserver_http_requests_total, job)",
         "current": {}, "hide": 0, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "sort": 1, "options": []},
        {"name": "instance", "label": "Instance", "type": "query",
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": "label_values(fileserver_http_requests_total{job=~\"$job\"}, instance)", "refId": "instance"},
         "definition": "label_values(fileserver_http_requests_total{job=~\"$job\"}, instance)",
         "current": {}, "hide": 0, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "sort": 1, "options": []},
    ]},
    "panels": panels,
}
print(json.dumps(dash, indent=2))
