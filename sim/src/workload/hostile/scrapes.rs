//! Hostile scrapes of the nodes' metrics listeners: requests built as a scraper (or a confused
//! client) would build them — a plain `GET /metrics`, another path, another method, a request
//! body, headers padded towards or past the listener's limit, random bytes — most then mutated
//! as the Kafka requests are, and now and then left unfinished. Each goes to a random node on a
//! connection of its own, which the client never closes first.
//!
//! Judged: the listener closes every connection within [`SCRAPE_WAIT`]; whatever it answers is
//! one HTTP/1.1 response with one of the listener's statuses, a `Content-Length` matching its
//! body, and for a 200 a body in Prometheus' text format (comments, or a series: a name, its
//! labels with their values escaped, and a number); and a request left as built is answered as
//! built (200 for `GET /metrics`, with the whole text, else its refusal).
//!
//! Not judged: that a refusal reaches a peer which sent more than the listener read (the
//! listener drains such bytes before it closes, because a real network resets a connection
//! closed with bytes unread; the simulator's connections do not reset).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::{Env, timeout};
use weir::server::metrics::HEAD_BYTES_MAX;

use super::requests::{Rng, mutate};

/// How often the client sends a scrape instead of a Kafka request.
pub(super) const SCRAPE_PERCENT: usize = 8;
/// How long the listener may take to answer and close: its head read timeout, its write
/// timeout and its drain after a refusal, and a little more.
pub(super) const SCRAPE_WAIT: Duration = Duration::from_secs(20);
/// The most answer bytes read from one scrape.
const ANSWER_BYTES_MAX: usize = 16 << 20;
/// How often a request is sent as built, and how often it is sent without its last bytes (so
/// that, most often, its head never ends).
const PRISTINE_PERCENT: usize = 40;
const UNFINISHED_PERCENT: usize = 10;

/// A request as built, and the status line it gets if sent as built.
fn built(rng: &mut Rng) -> (Vec<u8>, &'static str) {
    const OK: &str = "HTTP/1.1 200 OK";
    const BAD: &str = "HTTP/1.1 400 Bad Request";
    const NOT_FOUND: &str = "HTTP/1.1 404 Not Found";
    const METHOD: &str = "HTTP/1.1 405 Method Not Allowed";
    const TOO_LARGE: &str = "HTTP/1.1 431 Request Header Fields Too Large";
    match rng.below(8) {
        0 | 1 => (b"GET /metrics HTTP/1.1\r\nHost: weir\r\nAccept: */*\r\n\r\n".to_vec(), OK),
        2 => (b"GET /metrics?name[]=weir_fenced HTTP/1.0\r\n\r\n".to_vec(), OK),
        3 => (b"GET /admin HTTP/1.1\r\n\r\n".to_vec(), NOT_FOUND),
        4 => (b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello".to_vec(), METHOD),
        5 => {
            // Headers padded to just under the limit, or past it.
            let over = rng.chance(50);
            let pad = if over { HEAD_BYTES_MAX } else { HEAD_BYTES_MAX - 64 };
            let mut head = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
            head.resize(pad, b'a');
            head.extend_from_slice(b"\r\n\r\n");
            (head, if over { TOO_LARGE } else { OK })
        }
        6 => (b"GET  /metrics HTTP/1.1\r\n\r\n".to_vec(), BAD),
        _ => {
            let len = rng.below(HEAD_BYTES_MAX + 2048);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            bytes.extend_from_slice(b"\r\n\r\n");
            // Random bytes hold a blank line, or not: their answer is judged only by its form.
            (bytes, "")
        }
    }
}

/// Sends one hostile scrape to `addr` and judges what comes back: `Ok(true)` if it was served
/// (200), `Ok(false)` if refused or closed unanswered, `Err` with the violation.
pub(super) async fn scrape(env: &Env, addr: SocketAddr, rng: &mut Rng) -> Result<bool, String> {
    let (mut request, expected) = built(rng);
    let mut pristine = rng.chance(PRISTINE_PERCENT) || mutate(rng, &mut request);
    if rng.chance(UNFINISHED_PERCENT) && !request.is_empty() {
        request.truncate(request.len() - 1);
        pristine = false;
    }
    let clock = std::sync::Arc::clone(&env.clock);
    let exchange = async {
        let Ok(mut conn) = env.net.connect(addr).await else { return Ok(Vec::new()) };
        // A failed write (the listener closed first) still leaves what it answered.
        let _ = conn.write_all(&request).await;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return Ok(answer),
                Ok(n) if answer.len() + n > ANSWER_BYTES_MAX => {
                    return Err(format!("a scrape answered with over {ANSWER_BYTES_MAX} bytes"));
                }
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let answer = timeout(&*clock, SCRAPE_WAIT, exchange).await.map_err(|_| {
        format!(
            "a scrape's connection still open after {SCRAPE_WAIT:?} ({} bytes sent)",
            request.len()
        )
    })??;
    let what = || String::from_utf8_lossy(&request[..request.len().min(40)]).into_owned();
    if answer.is_empty() {
        if pristine && !expected.is_empty() {
            return Err(format!("{:?}… as built closed unanswered", what()));
        }
        return Ok(false);
    }
    let status = judged(&answer).map_err(|why| format!("{:?}… answered {why}", what()))?;
    if pristine && !expected.is_empty() && status != expected {
        return Err(format!("{:?}… as built answered {status:?}, not {expected:?}", what()));
    }
    // A scrape served as built holds the whole text: a body cut at a line's end would pass the
    // line checks.
    let whole = |body: &str| {
        body.ends_with('\n')
            && body.split('\n').any(|l| l == "weir_fenced 0" || l == "weir_fenced 1")
    };
    if pristine && status == "HTTP/1.1 200 OK" {
        let body = String::from_utf8_lossy(&answer);
        let body = body.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        if !whole(body) {
            return Err(format!(
                "{:?}… as built served {} bytes without weir_fenced",
                what(),
                body.len()
            ));
        }
    }
    Ok(status == "HTTP/1.1 200 OK")
}

/// Checks that `answer` is one whole HTTP response of the listener's; its status line.
fn judged(answer: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(answer).map_err(|_| "bytes that are not UTF-8".to_owned())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("with no end of headers")?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let statuses = [
        "HTTP/1.1 200 OK",
        "HTTP/1.1 400 Bad Request",
        "HTTP/1.1 404 Not Found",
        "HTTP/1.1 405 Method Not Allowed",
        "HTTP/1.1 431 Request Header Fields Too Large",
        "HTTP/1.1 503 Service Unavailable",
    ];
    if !statuses.contains(&status) {
        return Err(format!("the status line {status:?}"));
    }
    let length = lines
        .filter_map(|l| l.strip_prefix("Content-Length: "))
        .map(|n| n.parse::<usize>().map_err(|_| format!("Content-Length {n:?}")))
        .next()
        .ok_or("with no Content-Length")??;
    if length != body.len() {
        return Err(format!("Content-Length {length} and a body of {} bytes", body.len()));
    }
    if status == statuses[0] {
        for line in body.split('\n').filter(|l| !l.is_empty() && !l.starts_with('#')) {
            if !series_line(line) {
                return Err(format!("the series line {line:?}"));
            }
        }
    }
    Ok(status)
}

/// Whether `line` is one series of the text format: a metric name, optionally labels (each a
/// name, `=`, and a quoted value in which only `\\`, `\"` and `\n` are escapes and no quote
/// or line feed stands bare), a space and a number.
fn series_line(line: &str) -> bool {
    let named = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let name_end = line.find(|c: char| !named(c)).unwrap_or(line.len());
    if name_end == 0 {
        return false;
    }
    let mut rest = &line[name_end..];
    if let Some(labels) = rest.strip_prefix('{') {
        rest = labels;
        loop {
            let Some((label, value)) = rest.split_once("=\"") else { return false };
            if label.is_empty() || !label.chars().all(named) {
                return false;
            }
            let mut chars = value.char_indices();
            let close = loop {
                match chars.next() {
                    Some((_, '\\')) => {
                        if !matches!(chars.next(), Some((_, '\\' | '"' | 'n'))) {
                            return false;
                        }
                    }
                    Some((at, '"')) => break at,
                    Some((_, '\n')) | None => return false,
                    Some(_) => {}
                }
            };
            rest = &value[close + 1..];
            if let Some(more) = rest.strip_prefix(',') {
                rest = more;
            } else if let Some(end) = rest.strip_prefix('}') {
                rest = end;
                break;
            } else {
                return false;
            }
        }
    }
    rest.strip_prefix(' ').is_some_and(|value| value.parse::<f64>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::series_line;

    #[test]
    fn series_lines_are_read_as_the_text_format_writes_them() {
        for good in [
            "weir_fenced 0",
            "weir_groups{state=\"Stable\"} 2",
            r#"weir_group_members{group="a\"b\\c\nd e"} 1"#,
            "weir_request_duration_seconds_bucket{api=\"Fetch\",le=\"+Inf\"} 3",
            "weir_request_duration_seconds_sum{api=\"Fetch\"} 0.25",
        ] {
            assert!(series_line(good), "{good}");
        }
        for bad in [
            "",
            " 1",
            "weir_fenced",
            "weir_fenced x",
            "weir groups 1",
            "weir_groups{state=\"Stable} 2",
            "weir_groups{state=Stable} 2",
            "weir_groups{state=\"a\"b\"} 2",
            r#"weir_groups{state="a\qb"} 2"#,
            "weir_groups{=\"a\"} 2",
            "weir_groups{state=\"a\"} 2 3",
            "weir_groups{state=\"a\"}2",
        ] {
            assert!(!series_line(bad), "{bad}");
        }
    }
}
