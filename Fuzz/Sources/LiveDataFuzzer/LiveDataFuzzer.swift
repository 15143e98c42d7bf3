import FuzzTargets
import Foundation

// libFuzzer's entry point (libFuzzer supplies `main`: build with -sanitize=fuzzer and
// -parse-as-library). The target comes from $LIVEDATA_FUZZ_TARGET.

private let target: String = {
    guard let name = ProcessInfo.processInfo.environment["LIVEDATA_FUZZ_TARGET"], FuzzTargets.names.contains(name) else {
        FileHandle.standardError.write(Data("set LIVEDATA_FUZZ_TARGET to one of: \(FuzzTargets.names.joined(separator: ", "))\n".utf8))
        exit(2)
    }
    return name
}()

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
