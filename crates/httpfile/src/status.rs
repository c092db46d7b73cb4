//! Status codes: the pre-rendered HTTP/1.1 status lines and the reason
//! phrases error bodies carry.

/// The status line (with CRLF) for a code; unknown codes become 500.
pub fn status_line(code: u16) -> &'static [u8] {
    match code {
        200 => b"HTTP/1.1 200 OK\r\n",
        204 => b"HTTP/1.1 204 No Content\r\n",
        206 => b"HTTP/1.1 206 Partial Content\r\n",
        301 => b"HTTP/1.1 301 Moved Permanently\r\n",
        304 => b"HTTP/1.1 304 Not Modified\r\n",
        400 => b"HTTP/1.1 400 Bad Request\r\n",
        403 => b"HTTP/1.1 403 Forbidden\r\n",
        404 => b"HTTP/1.1 404 Not Found\r\n",
        405 => b"HTTP/1.1 405 Method Not Allowed\r\n",
        408 => b"HTTP/1.1 408 Request Timeout\r\n",
        412 => b"HTTP/1.1 412 Precondition Failed\r\n",
        416 => b"HTTP/1.1 416 Range Not Satisfiable\r\n",
        431 => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
        503 => b"HTTP/1.1 503 Service Unavailable\r\n",
        _ => b"HTTP/1.1 500 Internal Server Error\r\n",
    }
}

/// Short reason text used as the body of error responses.
pub fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        412 => "Precondition Failed",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}
