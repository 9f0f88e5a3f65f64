// A Rust client with the standard library only (spec §2: "Rust clients linked against
// glibc"), for tests/e2e/test_shim_clients.py; built there with `rustc` (no crates).
//
//     std_client HOST PORT MODEL [stream]
//
// Resolves HOST (std uses glibc's getaddrinfo), connects with std::net::TcpStream, sends
// one POST /v1/chat/completions over HTTP/1.1 and prints what a user's program sees:
// "peer ADDR", "status LINE", each x-aor-* header as "header NAME: VALUE", then for a
// chunked answer "chunks N" and "end terminator" (the 0-size chunk came) or "end cut"
// (EOF before it), and "body BYTES" / "done 0|1" ("data: [DONE]" seen).
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: std_client HOST PORT MODEL [stream]");
        std::process::exit(2);
    }
    let (host, model) = (&args[1], &args[3]);
    let port: u16 = args[2].parse().expect("PORT");
    let stream = args.get(4).map(|s| s == "stream").unwrap_or(false);
    let sock = match TcpStream::connect((host.as_str(), port)) {
        Ok(s) => s,
        Err(e) => {
            println!("connect error {:?}", e.raw_os_error());
            std::process::exit(4);
        }
    };
    sock.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    sock.set_nodelay(true).expect("TCP_NODELAY");
    println!("peer {}", sock.peer_addr().expect("peer_addr"));
    let body = format!(
        "{{\"model\":\"{}\",\"stream\":{},\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}",
        model, stream
    );
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}:{}\r\nAuthorization: Bearer client-token\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        host,
        port,
        body.len()
    );
    let mut w = sock.try_clone().expect("clone");
    w.write_all(head.as_bytes()).and_then(|_| w.write_all(body.as_bytes())).expect("write");
    let mut r = BufReader::new(sock);
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    println!("status {}", line.trim_end());
    let mut chunked = false;
    loop {
        line.clear();
        r.read_line(&mut line).expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let lower = l.to_ascii_lowercase();
        if lower.starts_with("x-aor-") {
            println!("header {}", l);
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut out = Vec::new();
    if chunked {
        let (mut chunks, mut terminator) = (0, false);
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let size = line.trim_end().split(';').next().unwrap_or("");
            let n = usize::from_str_radix(size, 16).expect("chunk size");
            if n == 0 {
                terminator = true;
                break;
            }
            let mut buf = vec![0u8; n + 2];
            r.read_exact(&mut buf).expect("chunk");
            out.extend_from_slice(&buf[..n]);
            chunks += 1;
        }
        println!("chunks {}", chunks);
        println!("end {}", if terminator { "terminator" } else { "cut" });
    } else {
        r.read_to_end(&mut out).expect("body");
    }
    let text = String::from_utf8_lossy(&out);
    println!("body {}", out.len());
    println!("done {}", text.contains("data: [DONE]") as i32);
}
