//! README.md taken apart: its fenced code blocks with their line numbers, the `## ` section
//! each is in, and the `<!-- readme-test … -->` comment just above it, if any.

/// One fenced block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The info string after the opening fence (`sh`, `text`, …; empty if none).
    pub lang: String,
    /// README line of the opening fence (1-based).
    pub fence_line: usize,
    /// The lines between the fences; the first is README line `fence_line + 1`.
    pub lines: Vec<String>,
    /// The `## ` heading the block is under ("" before the first one).
    pub section: String,
    /// The directives of the `<!-- readme-test … -->` comment right above the block.
    pub directives: Directives,
}

impl Block {
    /// `README.md:N` of the opening fence, for messages.
    pub fn at(&self) -> String {
        format!("README.md:{}", self.fence_line)
    }

    /// The block's text, lines joined with `\n`.
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }
}

/// What a `<!-- readme-test … -->` comment asks for: lines `substitute FROM => TO` and
/// `needs postgres`; any other line of the comment is prose for the reader.
#[derive(Debug, Clone, Default)]
pub struct Directives {
    /// Textual replacements made in the block before it runs, in order.
    pub substitutions: Vec<(String, String)>,
    /// The block runs only where PostgreSQL answers (else it is skipped, saying why).
    pub needs_postgres: bool,
}

/// Every fenced block of `readme`, in order. Panics on an unclosed fence.
pub fn parse(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut pending = Directives::default();
    let mut comment: Option<Vec<String>> = None;
    let mut open: Option<Block> = None;
    for (index, line) in readme.lines().enumerate() {
        let number = index + 1;
        if let Some(block) = open.as_mut() {
            if line.trim_end() == "```" {
                blocks.push(open.take().expect("an open block"));
            } else {
                block.lines.push(line.to_owned());
            }
            continue;
        }
        if let Some(body) = comment.as_mut() {
            match line.split_once("-->") {
                Some((last, _)) => {
                    body.push(last.to_owned());
                    pending = directives(&comment.take().expect("an open comment"));
                }
                None => body.push(line.to_owned()),
            }
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("<!-- readme-test") {
            let rest = rest.strip_prefix(':').unwrap_or(rest);
            match rest.split_once("-->") {
                Some((body, _)) => pending = directives(&[body.to_owned()]),
                None => comment = Some(vec![rest.to_owned()]),
            }
            continue;
        }
        if let Some(info) = line.strip_prefix("```") {
            open = Some(Block {
                lang: info.trim().to_owned(),
                fence_line: number,
                lines: Vec::new(),
                section: section.clone(),
                directives: std::mem::take(&mut pending),
            });
            continue;
        }
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim().to_owned();
        }
        // A directive belongs to the block right below it (blank lines allowed).
        if !line.trim().is_empty() {
            pending = Directives::default();
        }
    }
    if let Some(block) = open {
        panic!("{}: a fence that is never closed", block.at());
    }
    blocks
}

fn directives(lines: &[String]) -> Directives {
    let mut found = Directives::default();
    for line in lines.iter().map(|l| l.trim()) {
        if let Some(rule) = line.strip_prefix("substitute ") {
            let (from, to) = rule.split_once(" => ").unwrap_or_else(|| panic!("`substitute FROM => TO`, not `{line}`"));
            found.substitutions.push((from.trim().to_owned(), to.trim().to_owned()));
        } else if line == "needs postgres" {
            found.needs_postgres = true;
        }
    }
    found
}

/// The status a README line says its command answers: a trailing comment that starts with
/// one (`c -X POST … # 409 conflict`); `None` means any 2xx.
pub fn expected_status(line: &str) -> Option<u16> {
    let comment = line.match_indices('#').find(|(at, _)| *at == 0 || line[..*at].ends_with(char::is_whitespace))?;
    let words = line[comment.0 + 1..].split_whitespace().next()?;
    let status: u16 = words.parse().ok()?;
    (100..600).contains(&status).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_carry_their_line_section_and_directives() {
        let readme = "# T\n```sh\na\n```\n## One\n<!-- readme-test: needs postgres -->\n\n```sh\nb\nc\n```\n\
                      <!-- readme-test why:\nsubstitute x => y\n-->\n```text\nd\n```\n```ruby\ne\n```\n";
        let blocks = parse(readme);
        assert_eq!(blocks.len(), 4);
        assert_eq!((blocks[0].fence_line, blocks[0].section.as_str()), (2, ""));
        assert!(blocks[1].directives.needs_postgres);
        assert_eq!(
            (blocks[1].fence_line, blocks[1].lines.clone(), blocks[1].section.as_str()),
            (8, vec!["b".into(), "c".into()], "One")
        );
        assert_eq!(blocks[2].directives.substitutions, vec![("x".to_owned(), "y".to_owned())]);
        assert!(!blocks[3].directives.needs_postgres && blocks[3].directives.substitutions.is_empty());
    }

    #[test]
    fn a_leading_status_in_the_comment_is_the_expected_one() {
        assert_eq!(expected_status("c -X POST $T/x   # 409 `conflict` when late"), Some(409));
        assert_eq!(expected_status("curl -sk $T/healthz   # 200 {\"data\":1}"), Some(200));
        assert_eq!(expected_status("c $T/x   # status Canceled; 409 once started"), None);
        assert_eq!(expected_status("c \"$T/v1/messages?tag=a#b\""), None);
        assert_eq!(expected_status("c $T/x"), None);
    }
}
