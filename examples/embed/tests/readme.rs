//! The README's "Try it locally" block is this example, so that it cannot go stale.

#[test]
fn the_readme_shows_this_example_as_it_is() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../src/main.rs");
    let section = readme.split("## Embedding\n").nth(1).expect("the README has an Embedding section");
    let local = section.split("### Try it locally\n").nth(1).expect("the Embedding section has a Try it locally part");
    let block = local
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the Try it locally part holds a rust block");
    assert_eq!(
        format!("{block}\n"),
        example,
        "README.md's Try it locally block differs from examples/embed/src/main.rs"
    );
}
