//! Bounce and complaint reports sent to the server's inbound listener as a reporting MTA
//! would: core's report fixtures filled in for a message, and a minimal SMTP client.

use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The report fixture `name` from core's tests, about the message whose Message-ID is
/// `provider_id`, sent to `recipient` from `return_path`. A fixture that is not UTF-8 is
/// returned as it is.
pub fn report_fixture(name: &str, provider_id: &str, recipient: &str, return_path: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/reports").join(name);
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let Ok(text) = String::from_utf8(raw.clone()) else { return raw };
    text.replace("{{MESSAGE_ID}}", provider_id)
        .replace("{{RETURN_PATH}}", return_path)
        .replace("{{RECIPIENT}}", recipient)
        .into_bytes()
}

/// A minimal SMTP client: one transaction from the null sender, every reply code in order
/// (greeting, EHLO, MAIL, RCPT, DATA, end of data, QUIT); stops after a refused RCPT.
pub async fn smtp_send(addr: SocketAddr, rcpt: &str, data: &[u8]) -> Vec<u16> {
    let stream = TcpStream::connect(addr).await.expect("connect to the inbound listener");
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut codes = Vec::new();
    async fn reply(lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>) -> u16 {
        loop {
            let line = lines.next_line().await.expect("read a reply").expect("the server closed the connection");
            if line.as_bytes().get(3) != Some(&b'-') {
                return line[..3].parse().expect("a reply code");
            }
        }
    }
    codes.push(reply(&mut lines).await);
    for command in ["EHLO reporter.example".to_owned(), "MAIL FROM:<>".to_owned(), format!("RCPT TO:<{rcpt}>")] {
        write.write_all(format!("{command}\r\n").as_bytes()).await.unwrap();
        codes.push(reply(&mut lines).await);
    }
    if codes.last() != Some(&250) {
        return codes;
    }
    write.write_all(b"DATA\r\n").await.unwrap();
    codes.push(reply(&mut lines).await);
    let mut stuffed = Vec::with_capacity(data.len() + 64);
    for line in data.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first() == Some(&b'.') {
            stuffed.push(b'.');
        }
        stuffed.extend_from_slice(line);
        stuffed.extend_from_slice(b"\r\n");
    }
    stuffed.extend_from_slice(b".\r\n");
    write.write_all(&stuffed).await.unwrap();
    codes.push(reply(&mut lines).await);
    write.write_all(b"QUIT\r\n").await.unwrap();
    codes.push(reply(&mut lines).await);
    codes
}
