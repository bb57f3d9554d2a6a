// A plugin whose module body throws while loading.
function explode(): never {
  throw new RangeError("fixture exploded while loading");
}
explode();
export default { id: "build-fixture-throws", register() {} };
