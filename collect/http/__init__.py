"""The measurement path's HTTP: `client.stream` sends one request and stamps every chunk on
arrival; `connection` is the HTTP/1.1 keep-alive pool it uses, `reply` parses one response as
its bytes arrive, with the kernel's receive time of every read.

Proxies: specsweep talks to the servers it measures directly and ignores the environment's
proxy settings (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) on both of its paths: the
streaming client never uses a proxy (a proxy's own delay would land in every stamp: it would
measure the proxy), and every httpx client collect builds (`client.http_client`, the health
check) is made with `trust_env=False` so that health, scrapes and server info reach the same
server the same way. A server only reachable through a proxy is reached with an SSH tunnel
(an `ssh` host) or an `external` host's URL instead.
"""
