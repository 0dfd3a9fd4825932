// A build script, so that cargo takes the build dependencies above into the
// workspace's one feature set too.
fn main() {}
