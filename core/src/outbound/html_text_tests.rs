use proptest::prelude::*;

use super::*;

fn text(html: &str) -> String {
    text_from_html(html).unwrap_or_default()
}

#[test]
fn paragraphs_headings_and_breaks_become_lines() {
    let html = "<html><head><title>Invoice</title><style>p { color: red }</style></head><body>\
        <h1>Your   invoice</h1><p>Hello Ann,<br>thanks for\n   your order.</p>\
        <div>Total: 42 &euro;</div><div>Due: today</div><p>Bye</p>\
        <script>alert('x')</script><!-- a comment --></body></html>";
    assert_eq!(text(html), "Your invoice\n\nHello Ann,\nthanks for your order.\n\nTotal: 42 €\nDue: today\n\nBye");
}

#[test]
fn links_keep_their_targets_as_text() {
    let cases = [
        (
            r#"<a href="https://shop.example.com/o/42?a=1&amp;b=2">your order</a>"#,
            "your order (https://shop.example.com/o/42?a=1&b=2)",
        ),
        (r#"See <a href="https://x.example/">https://x.example/</a> now"#, "See https://x.example/ now"),
        (r#"See <a href="https://x.example/">x.example</a>"#, "See x.example"),
        (r#"<a href="mailto:help@x.example?subject=Hi">Help</a>"#, "Help (help@x.example)"),
        (r#"<a href="mailto:help@x.example">help@x.example</a>"#, "help@x.example"),
        (
            r##"<a href="#top">Back to top</a> <a href="/rel">Relative</a> <a href="javascript:x()">JS</a>"##,
            "Back to top Relative JS",
        ),
        (r#"<a href="https://x.example/buy"><img src="b.png" alt="Buy now"></a>"#, "Buy now (https://x.example/buy)"),
        (r#"<a href="https://x.example/buy"><img src="b.png"></a>"#, "https://x.example/buy"),
        (
            r#"<a href="https://x.example/a">one <a href="https://x.example/b">two</a>"#,
            "one (https://x.example/a) two (https://x.example/b)",
        ),
        (r#"<p><a href="https://x.example/a">unclosed"#, "unclosed (https://x.example/a)"),
        (
            r#"<a href="https://x.example/p"><p>Block label</p></a><p>next</p>"#,
            "Block label (https://x.example/p)\n\nnext",
        ),
    ];
    for (html, expected) in cases {
        assert_eq!(text(html), expected, "{html}");
    }
}

#[test]
fn lists_get_markers_and_tables_keep_rows_on_lines() {
    let html = "<p>Items:</p><ul><li>one</li><li><p>two</p><ol><li>a</li><li>b</li></ol></li></ul>\
        <table><tr><td>Qty</td><td>Price</td></tr><tr><td>2</td><td>9.90</td></tr></table>";
    assert_eq!(text(html), "Items:\n\n- one\n- two\n  1. a\n  2. b\n\nQty Price\n2 9.90");
}

#[test]
fn pre_keeps_its_white_space() {
    let html = "<p>Code:</p><pre>fn main() {\n    go();\r\n}</pre><p>after</p>";
    assert_eq!(text(html), "Code:\n\nfn main() {\n    go();\n}\n\nafter");
}

#[test]
fn character_references_are_decoded() {
    let html = "&lt;b&gt; &amp; &quot;q&quot; &apos;a&apos; &copy; &Eacute;t&eacute; &#8364; &#x1F600; &#150; \
        &#0; &#xD800; &#99999999999; &unknown; &amp &nbsp;x";
    assert_eq!(text(html), "<b> & \"q\" 'a' © Été € 😀 – \u{fffd} \u{fffd} \u{fffd} &unknown; &amp x");
}

#[test]
fn preview_padding_disappears_but_joiners_inside_words_stay() {
    let html = "<div style=\"display:none\">Preview&zwnj;&nbsp;&zwnj;&nbsp;&#8203; &#847;&nbsp;</div>\
        <p>Family: 👨\u{200d}👩\u{200d}👧</p>";
    assert_eq!(text(html), "Preview\n\nFamily: 👨\u{200d}👩\u{200d}👧");
}

#[test]
fn html_without_visible_text_gives_none() {
    for html in ["", "   ", "<img src=\"logo.png\">", "<style>x{}</style><!-- c -->", "<p>&nbsp;</p><br><br>"] {
        assert_eq!(text_from_html(html), None, "{html:?}");
    }
}

#[test]
fn malformed_and_hostile_markup_converts_in_bounded_time_and_size() {
    let deep = "<div><ul><li><a href=\"https://x.example\">".repeat(20_000) + "bottom";
    let converted = text(&deep);
    assert!(converted.ends_with("bottom (https://x.example)"), "{}", &converted[converted.len() - 60..]);
    assert!(converted.len() < deep.len() * 2);

    for html in [
        "<p>unclosed <b>bold <i>both",
        "</p></div></a></ul></pre>text",
        "<a href=\"https://x.example/\u{0}\">nul</a>",
        "<<<>>>&&&;;;<a <b",
        "<svg><![CDATA[cdata text]]></svg>",
        "<br>".repeat(10_000).as_str(),
        "&".repeat(10_000).as_str(),
    ] {
        let converted = text(html);
        assert!(!converted.contains("\n\n\n"), "{converted:?}");
        assert!(converted.len() <= html.len() * 2 + 64, "{html:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::outbound::test_support::proptest_cases(256)))]

    /// Whatever the HTML, the text has no markup-free-form surprises: no control characters
    /// other than line feeds, no run of more than one blank line, no white space at either
    /// end, and it is at most a small multiple of the input.
    #[test]
    fn any_html_gives_clean_bounded_text(
        html in "(<(/?)(p|div|a href=\"https://e.example/x\"|br|ul|ol|li|pre|td|tr|table|script|style|title|h1|img alt=\"pic\")>|&[a-z#0-9]{0,8};?|[ \t\r\n]|\\PC){0,80}",
    ) {
        let Some(converted) = text_from_html(&html) else { return Ok(()) };
        prop_assert!(!converted.chars().any(|c| c.is_control() && c != '\n'), "{:?}", converted);
        prop_assert!(!converted.contains("\n\n\n"), "{:?}", converted);
        prop_assert_eq!(converted.trim(), converted.as_str());
        prop_assert!(converted.len() <= html.len() * 4 + 64, "{:?} -> {:?}", html, converted);
    }
}
