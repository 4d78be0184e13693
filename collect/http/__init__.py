"""The measurement path's HTTP: `client.stream` sends one request and stamps every chunk on
arrival; `connection` is the HTTP/1.1 keep-alive pool it uses, `reply` parses one response as
its bytes arrive, with the kernel's receive time of every read."""
