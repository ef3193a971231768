//! Hostile input: garbage bytes, invalid UTF-8, NUL and random command lines never take
//! the listener down, and never get a reply that is not a well-formed SMTP reply.

use crate::common::{TestServer, settings};
use proptest::prelude::*;

#[tokio::test]
async fn binary_garbage_gets_errors_and_the_session_still_answers() {
    let mut settings = settings();
    settings.max_errors = 100;
    let server = TestServer::start(settings).await;
    let mut client = server.greeted_client().await;

    for garbage in
        [&b"\xff\xfe\xfd\r\n"[..], b"NOOP\0\r\n", b"MAIL FROM:<\xc3\x28@x.example>\r\n", b"\r\n", b"\x1b[2J\n"]
    {
        client.send(garbage).await;
        let reply = client.reply().await;
        assert!((500..=501).contains(&reply.code), "{garbage:?} got {reply:?}");
    }
    client.command("NOOP", 250).await;
}

#[tokio::test]
async fn garbage_inside_data_is_delivered_as_is() {
    let server = TestServer::start(settings()).await;
    let mut client = server.greeted_client().await;
    client.command("MAIL FROM:<>", 250).await;
    client.command("RCPT TO:<bounces+x@bounces.example>", 250).await;
    client.command("DATA", 354).await;
    let body: Vec<u8> = (0u8..=255).filter(|&b| b != b'\r' && b != b'\n' && b != b'.').collect();

    client.send([&body[..], b"\r\n\0\xff\n.\r\n.\r\n"].concat()).await;

    client.expect(250).await;
    assert_eq!(server.handler.received()[0].1, [&body[..], b"\r\n\0\xff\n.\r\n"].concat());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_command_lines_never_break_a_live_listener(
        lines in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..200),
                "(MAIL FROM:|RCPT TO:|EHLO|HELO|VRFY|DATA|RSET)[ <>@:.,a-z0-9=\u{0}-\u{1f}\u{80}-\u{ff}]{0,60}"
                    .prop_map(String::into_bytes),
            ],
            1..12,
        )
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let mut settings = settings();
            settings.max_errors = 1000;
            let server = TestServer::start(settings).await;
            let mut client = server.client().await;
            for mut line in lines {
                // One line per command (a DATA that succeeds is followed by a message end).
                line.retain(|&b| b != b'\n');
                line.extend_from_slice(b"\r\n.\r\n");
                client.send(&line).await;
            }
            client.send("QUIT\r\n").await;
            // Every reply is well-formed; the session ends with our 221.
            let mut last = None;
            while let Some(reply) = client.try_reply().await {
                assert!((200..600).contains(&reply.code), "{reply:?}");
                last = Some(reply.code);
            }
            assert_eq!(last, Some(221));
            // And the listener still serves new sessions.
            let mut again = server.greeted_client().await;
            again.command("NOOP", 250).await;
            server.shut_down().await;
        });
    }
}
