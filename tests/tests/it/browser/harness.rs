//! The harness itself: the browser reaches the server over HTTPS despite its self-signed
//! certificate, at the exact viewport sizes the screenshots use.

use tidings_e2e::TestServer;
use tidings_e2e::browser::{Browser, available};

use crate::common::block_on;

/// The width and height of a PNG, from its IHDR chunk.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 24, "a PNG");
    let word = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

/// `/healthz` loads at 1280 and at 390 CSS pixels wide, and a screenshot is exactly the
/// viewport.
#[test]
fn the_browser_loads_the_server_at_both_widths() {
    if !available("the_browser_loads_the_server_at_both_widths") {
        return;
    }
    block_on(async {
        let server = TestServer::start().await;
        let browser = Browser::start(1280, 800).await;
        for (width, height) in [(1280, 800), (390, 844)] {
            browser.set_viewport(width, height).await;
            browser.goto(&server.url("/healthz")).await;
            assert_eq!(browser.response_status().await, 200, "/healthz over HTTPS");
            assert_eq!(png_size(&browser.screenshot().await), (width, height), "a screenshot of the viewport");
        }
        browser.close().await;
    });
}
