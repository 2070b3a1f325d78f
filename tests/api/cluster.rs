use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
use payorch::db::PgConn;
use payorch::db::{ClusterOptions, PrivateCluster};

use crate::helpers::temp_dir;

async fn start(options: &ClusterOptions) -> PrivateCluster {
    let options = options.clone();
    tokio::task::spawn_blocking(move || PrivateCluster::start(&options))
        .await
        .unwrap()
        .expect("start the private cluster")
}

async fn stop(cluster: PrivateCluster) {
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .expect("stop the private cluster");
}

#[tokio::test]
async fn private_cluster_starts_is_reused_and_stops_cleanly() {
    let data_dir = temp_dir("reuse");
    let options = ClusterOptions {
        data_dir: data_dir.clone(),
        ephemeral: true,
    };

    let first = start(&options).await;
    assert!(first.started_here());
    let pgdata = first.root().join("data");
    assert!(pgdata.join("PG_VERSION").exists());
    let mut conn = PgConn::establish(&first.database_url("postgres"))
        .await
        .unwrap();
    conn.batch_execute(
        "CREATE TABLE survives_restart (x int); INSERT INTO survives_restart VALUES (7)",
    )
    .await
    .unwrap();
    drop(conn);
    let root = first.root().to_path_buf();
    stop(first).await;
    assert!(
        !pgdata.join("postmaster.pid").exists(),
        "a clean stop removes the pid file"
    );

    // Second start: same folder, no initdb, the data is still there.
    let second = start(&options).await;
    assert_eq!(second.root(), root);
    let mut conn = PgConn::establish(&second.database_url("postgres"))
        .await
        .unwrap();
    let rows = diesel::sql_query("SELECT x FROM survives_restart")
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    drop(conn);

    // A third starter while it runs joins it and does not own it.
    let joined = start(&options).await;
    assert!(!joined.started_here());
    assert!(joined.is_running());

    stop(second).await;
    assert!(!pgdata.join("postmaster.pid").exists());
    let _ = std::fs::remove_dir_all(data_dir);
}

#[tokio::test]
async fn the_socket_is_the_only_way_in() {
    let data_dir = temp_dir("socket");
    let cluster = start(&ClusterOptions {
        data_dir: data_dir.clone(),
        ephemeral: true,
    })
    .await;
    let conf = std::fs::read_to_string(cluster.root().join("data/postgresql.conf")).unwrap();
    assert!(conf.contains("listen_addresses = ''"));
    assert!(cluster.socket_dir().join(".s.PGSQL.5432").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(cluster.socket_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o700,
        "only the cluster's owner may reach the socket"
    );
    stop(cluster).await;
    let _ = std::fs::remove_dir_all(data_dir);
}
