import FuzzTargets
import Foundation

// The target comes from $LIVEDATA_FUZZ_TARGET.
private let target: String = {
    guard let name = ProcessInfo.processInfo.environment["LIVEDATA_FUZZ_TARGET"], FuzzTargets.names.contains(name) else {
        FileHandle.standardError.write(Data("set LIVEDATA_FUZZ_TARGET to one of: \(FuzzTargets.names.joined(separator: ", "))\n".utf8))
        exit(2)
    }
    return name
}()

// Compiled as a library (no top-level code): SwiftPM's entry point `LiveDataFuzzer_main` is
// defined below, as libFuzzer's driver or as a replayer.
#if LIBFUZZER
// libFuzzer's entry point (libFuzzer supplies the driver: built by scripts/fuzz with
// -sanitize=fuzzer,address -DLIBFUZZER).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    FuzzTargets.run(target, UnsafeRawBufferPointer(start: start, count: count))
    return 0
}

// SwiftPM links an executable's `main` to `<module>_main`; hand the process to libFuzzer's
// driver from there.
@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("LiveDataFuzzer_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runDriver(&count, &arguments, fuzzOne)
}
#else
// Without libFuzzer: runs each file named on the command line through the target once (to
// replay a failing input under a debugger).
@_cdecl("LiveDataFuzzer_main")
public func replayMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    for path in CommandLine.arguments.dropFirst() {
        guard let data = FileManager.default.contents(atPath: path) else {
            FileHandle.standardError.write(Data("cannot read \(path)\n".utf8))
            return 1
        }
        data.withUnsafeBytes { FuzzTargets.run(target, $0) }
    }
    return 0
}
#endif
