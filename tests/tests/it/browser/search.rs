//! Finding messages in the dashboard (issue #31 item 2): part of a subject typed into the one
//! search box finds its messages, and the list pages older and back newer keeping the search,
//! at 1280 and 390 CSS pixels wide, without sideways scrolling.

use serde_json::{Value, json};
use tidings_e2e::browser::available;

use super::dashboard::{FROM, Setup, browser, sign_in, submit};
use crate::common::{assert_ok, block_on, create_key};

const SIZES: [(u32, u32); 2] = [(1280, 800), (390, 844)];

/// The ids of the rows of `table#messages`.
async fn rows(browser: &tidings_e2e::browser::Browser) -> Vec<String> {
    let ids = browser
        .execute("return [...document.querySelectorAll('table#messages tr[data-id]')].map(r => r.dataset.id);", vec![])
        .await;
    ids.as_array().expect("ids").iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect()
}

#[test]
fn a_search_by_part_of_a_subject_pages_older_and_back_at_1280_and_390_px() {
    if !available("a_search_by_part_of_a_subject_pages_older_and_back_at_1280_and_390_px") {
        return;
    }
    block_on(async {
        let setup = Setup::start().await;
        // A key fast enough for one batch of 53 (the bootstrap key sends 10 a second).
        let (_, bulk) = create_key(&setup.server, &setup.key, json!({"name": "bulk", "rateLimitPerSec": 100})).await;
        let mut batch: Vec<Value> = (1..=52)
            .map(|n| json!({"from": FROM, "to": format!("buyer{n}@shop.example"), "subject": format!("Your Receipt n{n}"), "text": "t"}))
            .collect();
        batch.push(json!({"from": FROM, "to": "ann@example.com", "subject": "Welcome aboard", "text": "t"}));
        let (status, body) = setup.server.post("/v1/messages/batch", &bulk, Value::Array(batch)).await;
        assert_ok(status, &body, 201, "the batch");

        let browser = browser().await;
        sign_in(&browser, &setup, &setup.key).await;
        for (width, height) in SIZES {
            browser.set_viewport(width, height).await;
            browser.goto(&setup.url("/messages")).await;
            browser.fill("form#filters #q", "RECEIPT N").await;
            submit(&browser, "form#filters").await;
            let first = rows(&browser).await;
            assert_eq!(first.len(), 50, "at {width}: a full first page:\n{}", browser.page_text().await);
            assert!(!browser.page_text().await.contains("Welcome aboard"), "at {width}: only receipts");
            assert!(browser.try_find("a.prev").await.is_none(), "at {width}: nothing is newer");
            let value = browser.execute("return document.querySelector('#q').value;", vec![]).await;
            assert_eq!(value, "RECEIPT N", "at {width}: the search stays in its box");
            let sideways =
                browser.execute("return document.scrollingElement.scrollWidth - window.innerWidth;", vec![]).await;
            assert!(sideways.as_i64().unwrap_or(1) <= 0, "at {width}: no sideways scroll ({sideways})");

            browser.click_to_navigate("a.next").await;
            let older = rows(&browser).await;
            assert_eq!(older.len(), 2, "at {width}: the last two receipts");
            assert!(older.iter().all(|id| !first.contains(id)), "at {width}: older messages");
            assert!(browser.try_find("a.next").await.is_none(), "at {width}: the last page");

            browser.click_to_navigate("a.prev").await;
            assert!(browser.path().await.starts_with("/messages"));
            assert_eq!(rows(&browser).await, first, "at {width}: back on the first page");
            let url = browser.url().await;
            assert!(url.query().unwrap_or_default().contains("endingBefore="), "{url}");
            assert!(url.query().unwrap_or_default().contains("q=RECEIPT"), "the search is kept: {url}");
            assert!(browser.try_find("a.prev").await.is_none(), "at {width}: nothing newer than the first page");
        }
        browser.close().await;
    });
}
