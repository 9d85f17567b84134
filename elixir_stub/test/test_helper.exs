# Every integration test talks to real Python workers: wait until the default pool has them all.
CompilationBridge.TestSupport.await_workers(
  :default,
  Application.fetch_env!(:compilation_bridge, :pool_size)
)

ExUnit.start(timeout: 120_000)
