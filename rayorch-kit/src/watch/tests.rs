use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};

use super::metrics::backlog_seconds;
use super::*;

#[test]
fn the_backlog_is_queued_work_times_seconds_per_grain_over_replicas() {
    // 10 Grains took 5 replica-seconds: 0.5 s each; 8 queued over 2 replicas.
    assert_eq!(backlog_seconds(8, 5.0, 10, 2), Some(2.0));
    assert_eq!(backlog_seconds(0, 5.0, 10, 2), Some(0.0));
    // Nothing measured yet: no figure rather than a made-up one.
    assert_eq!(backlog_seconds(8, 0.0, 0, 2), None);
    // Work waits and nobody can take it.
    assert_eq!(backlog_seconds(8, 5.0, 10, 0), Some(f64::INFINITY));
}

fn get(addr: SocketAddr, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(request).unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_endpoint_answers_its_three_paths_and_refuses_the_rest() {
    let watch = Watch::new();
    let server = watch.serve(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    let addr = server.addr();
    let page = get(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(page.contains("text/html") && page.contains("/api/state"));
    let metrics = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    let state = get(addr, b"GET /api/state?x=1 HTTP/1.0\r\n\r\n");
    let body = state.split("\r\n\r\n").nth(1).unwrap();
    let json: Json = serde_json::from_str(body).unwrap();
    assert_eq!(json["finished"], false);
    assert!(get(addr, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let head = get(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
    let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    assert!(get(addr, huge.as_bytes()).starts_with("HTTP/1.1 431"));
    // A client that connects and says nothing holds only its own connection.
    let _silent = TcpStream::connect(addr).unwrap();
    assert!(get(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
    drop(server);
    assert!(
        TcpStream::connect(addr).is_err(),
        "the server stops with its handle"
    );
}
