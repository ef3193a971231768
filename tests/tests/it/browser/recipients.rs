//! Several recipients in the dashboard (contract §10): the test-send form takes several
//! addresses in To, Cc and Bcc; the message page lists every recipient with its type and
//! status and the timeline names the recipient of each event; the list shows the to field
//! and how many more recipients there are.

use tidings_e2e::browser::available;

use super::dashboard::{Setup, browser, id_in_url, sign_in, submit};
use crate::common::block_on;

#[test]
fn send_to_several_from_the_form_and_see_each_recipient_delivered() {
    if !available("send_to_several_from_the_form_and_see_each_recipient_delivered") {
        return;
    }
    block_on(async {
        let setup = Setup::fresh().await;
        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;

        browser.goto(&setup.url("/messages/new")).await;
        browser.fill("form#send-test #to", "\"Reader, Ann\" <ann@example.com>, bob@example.com").await;
        browser.fill("form#send-test #cc", "Carol <carol@example.com>").await;
        browser.fill("form#send-test #bcc", "audit@example.com").await;
        browser.fill("form#send-test #subject", "To several").await;
        browser.fill("form#send-test #text", "Hello, all.").await;
        submit(&browser, "form#send-test").await;
        let id = id_in_url(&browser, "messages").await;

        browser.reload_until("#status[data-status=Delivered]").await;
        let rows = browser.find_all("table#recipients tbody tr").await;
        let mut shown = Vec::new();
        for row in rows {
            shown.push(row.text().await.unwrap());
        }
        assert_eq!(shown.len(), 4, "every recipient has a row: {shown:?}");
        for (row, (who, kind)) in shown.iter().zip([
            ("ann@example.com", "to"),
            ("bob@example.com", "to"),
            ("carol@example.com", "cc"),
            ("audit@example.com", "bcc"),
        ]) {
            assert!(row.contains(who) && row.contains(kind) && row.contains("Delivered"), "{who}: {row}");
        }
        assert!(shown[0].contains("Reader, Ann"), "the display name with its comma: {shown:?}");
        let delivered = browser.find_all("ol#timeline > li[data-event=Delivered] .recipient").await;
        assert_eq!(delivered.len(), 4, "each Delivered event names its recipient");
        let headers = browser.find("table#headers").await.text().await.unwrap();
        assert!(
            headers.contains("carol@example.com") && !headers.contains("audit@example.com"),
            "no Bcc header: {headers}"
        );

        browser.goto(&setup.url("/messages")).await;
        let row = browser.find(&format!("table#messages tr[data-id=\"{id}\"]")).await.text().await.unwrap();
        assert!(row.contains("bob@example.com") && row.contains("+2"), "the to field and two more: {row}");
        let message = setup.wait_for_status(&id, "Delivered").await;
        assert_eq!(message["recipients"].as_array().map(Vec::len), Some(4), "{message}");
        browser.close().await;
    });
}
