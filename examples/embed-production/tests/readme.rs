//! The README's "In production" block is this example, so that it cannot go stale.

#[test]
fn the_readme_shows_this_example_as_it_is() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../src/main.rs");
    let section = readme.split("## Embedding\n").nth(1).expect("the README has an Embedding section");
    let production =
        section.split("### In production\n").nth(1).expect("the Embedding section has an In production part");
    let block = production
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the In production part holds a rust block");
    assert_eq!(
        format!("{block}\n"),
        example,
        "README.md's In production block differs from examples/embed-production/src/main.rs"
    );
}
