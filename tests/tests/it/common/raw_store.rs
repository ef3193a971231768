//! The store as an attacker who copied it sees it: every byte of the sled files, or every
//! row of every table of the PostgreSQL database as text, for tests that search it for what
//! must not be there.

use std::path::Path;

use tidings_e2e::DataDir;

/// Every table of the database at `url`, as text, one row a line.
pub async fn dump_database(url: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    let driver = tokio::spawn(connection);
    let tables = client
        .query(
            "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables \
                WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')",
            &[],
        )
        .await
        .expect("list tables");
    assert!(!tables.is_empty(), "the database has tables");
    let mut dump = String::new();
    for table in tables {
        let name: String = table.get(0);
        let rows = client.query(&format!("SELECT t::text FROM {name} t"), &[]).await.expect("dump a table");
        for row in rows {
            dump.push_str(&row.get::<_, String>(0));
            dump.push('\n');
        }
    }
    drop(client);
    let _ = driver.await;
    dump
}

/// The bytes of every file under `dir`.
pub fn read_tree(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            bytes.extend(read_tree(&path));
        } else {
            bytes.extend(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
        }
    }
    bytes
}

/// The whole store of `data_dir` (no server may run on it): the database dump with
/// `TIDINGS_E2E_STORE=postgres`, else the sled files; and what it is, for messages.
pub async fn raw_store(data_dir: &DataDir) -> (Vec<u8>, &'static str) {
    match data_dir.database_url() {
        Some(url) => (dump_database(&url).await.into_bytes(), "the database"),
        None => (read_tree(&data_dir.path().join("store")), "the sled store"),
    }
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}
