#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in time with millisecond precision, as live updates carry it.
///
/// Stored as milliseconds since 1970-01-01T00:00:00Z so that comparing two updates for
/// ordering is one integer comparison. Printed as ISO-8601 UTC with milliseconds
/// (`2026-11-21T10:15:03.120Z`).
public struct LiveTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// The current wall-clock time.
    public static var now: LiveTimestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return LiveTimestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// Parses ISO-8601 (`2026-11-21T10:15:03.120Z`, `2026-11-21T11:15:03+01:00`) or a string
    /// of epoch milliseconds. Fractions beyond milliseconds are truncated.
    /// - Returns: `nil` when the text is neither.
    public init?(parsing text: String) {
        var text = text
        guard let value = text.withUTF8({ Self.parse(UnsafeRawBufferPointer($0)) }) else { return nil }
        self = value
    }

    /// The ISO-8601 UTC form with milliseconds.
    public var description: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        write(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the ISO-8601 UTC form with milliseconds as UTF-8 (the published JSON is built
    /// from bytes).
    public func write(to bytes: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.maximumLength) { buffer in
            let count = write(into: buffer.baseAddress!)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// The most bytes ``write(into:)`` writes: a sign, a year of up to 19 digits, and the
    /// fixed 20 bytes after it.
    public static let maximumLength = 40

    /// Writes the ISO-8601 UTC form with milliseconds at `at` (at most ``maximumLength``
    /// bytes); returns how many it wrote.
    public func write(into at: UnsafeMutablePointer<UInt8>) -> Int {
        let millis = millisecondsSince1970
        var days = millis / 86_400_000
        var rest = millis % 86_400_000
        if rest < 0 {
            rest += 86_400_000
            days -= 1
        }
        let (year, month, day) = civil(fromDays: days)
        // The year takes four digits or more, and a sign before the year 0; the rest is
        // fixed: `-MM-DDTHH:MM:SS.mmmZ`, 20 bytes (this runs for every timestamp of every
        // published change).
        var count = 0
        if year < 0 {
            at[0] = UInt8(ascii: "-")
            count = 1
        }
        count += pad(at + count, abs(year), 4)
        let text = at + count
        func put(_ value: Int64, _ width: Int, at end: Int) {
            var value = value
            for index in stride(from: end - 1, through: end - width, by: -1) {
                text[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10)
                value /= 10
            }
        }
        text[0] = UInt8(ascii: "-")
        put(month, 2, at: 3)
        text[3] = UInt8(ascii: "-")
        put(day, 2, at: 6)
        text[6] = UInt8(ascii: "T")
        put(rest / 3_600_000, 2, at: 9)
        text[9] = UInt8(ascii: ":")
        put(rest / 60_000 % 60, 2, at: 12)
        text[12] = UInt8(ascii: ":")
        put(rest / 1000 % 60, 2, at: 15)
        text[15] = UInt8(ascii: ".")
        put(rest % 1000, 3, at: 19)
        text[19] = UInt8(ascii: "Z")
        return count + 20
    }

    /// Parses from raw UTF-8 bytes; used by the payload decoder without building a String.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> LiveTimestamp? {
        if bytes.isEmpty { return nil }
        // Epoch milliseconds, at most 15 digits, read in the pass that finds they are digits
        // (the value wraps only past 18 digits, and is then not used).
        var value: Int64 = 0
        var index = 0
        while index < bytes.count, case let digit = bytes[index] &- UInt8(ascii: "0"), digit < 10 {
            value = value &* 10 &+ Int64(digit)
            index += 1
        }
        if index == bytes.count { return bytes.count <= 15 ? LiveTimestamp(millisecondsSince1970: value) : nil }
        return parseISO8601(bytes)
    }

    private static func parseISO8601(_ b: UnsafeRawBufferPointer) -> LiveTimestamp? {
        var position = 0
        func digits(_ count: Int) -> Int64? {
            guard position + count <= b.count else { return nil }
            var value: Int64 = 0
            for offset in 0..<count {
                let byte = b[position + offset]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            position += count
            return value
        }
        func expect(_ character: UInt8) -> Bool {
            guard position < b.count, b[position] == character else { return false }
            position += 1
            return true
        }
        guard let year = digits(4), expect(UInt8(ascii: "-")), let month = digits(2), expect(UInt8(ascii: "-")),
            let day = digits(2)
        else { return nil }
        guard position < b.count, b[position] == UInt8(ascii: "T") || b[position] == UInt8(ascii: "t") else {
            return nil
        }
        position += 1
        guard let hour = digits(2), expect(UInt8(ascii: ":")), let minute = digits(2), expect(UInt8(ascii: ":")),
            let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year, month), hour <= 23, minute <= 59,
            second <= 60
        else { return nil }
        var millis: Int64 = 0
        if position < b.count, b[position] == UInt8(ascii: ".") || b[position] == UInt8(ascii: ",") {
            position += 1
            var scale: Int64 = 100
            var count = 0
            while position < b.count, b[position] >= UInt8(ascii: "0"), b[position] <= UInt8(ascii: "9") {
                millis += Int64(b[position] - UInt8(ascii: "0")) * scale
                scale /= 10
                position += 1
                count += 1
            }
            if count == 0 { return nil }
        }
        guard position < b.count else { return nil }  // a time zone is required
        var offsetMinutes: Int64 = 0
        switch b[position] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            position += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = b[position] == UInt8(ascii: "+") ? 1 : -1
            position += 1
            guard let hours = digits(2), hours <= 23 else { return nil }
            _ = expect(UInt8(ascii: ":"))
            guard let minutes = digits(2), minutes <= 59 else { return nil }
            offsetMinutes = sign * (hours * 60 + minutes)
        default:
            return nil
        }
        guard position == b.count else { return nil }
        let days = daysFromCivil(year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetMinutes * 60
        return LiveTimestamp(millisecondsSince1970: seconds * 1000 + millis)
    }
}

// Howard Hinnant's civil-calendar algorithms: exact for the proleptic Gregorian calendar.
private func daysFromCivil(_ year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

private func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

private func daysInMonth(_ year: Int64, _ month: Int64) -> Int64 {
    switch month {
    case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
}

/// `value` in decimal, at least `width` digits (zeros in front).
/// Writes `value` (not negative) in decimal with at least `width` digits, zeros first, at
/// `at`; returns how many bytes.
private func pad(_ at: UnsafeMutablePointer<UInt8>, _ value: Int64, _ width: Int) -> Int {
    var digits = 1
    var rest = value
    while rest >= 10 {
        rest /= 10
        digits += 1
    }
    let length = max(width, digits)
    var value = value
    for index in stride(from: length - 1, through: 0, by: -1) {
        at[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10)
        value /= 10
    }
    return length
}

extension Duration {
    /// Whole milliseconds (rounded toward zero), as the daemon counts time.
    package var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Whole nanoseconds (rounded toward zero).
    package var nanoseconds: Int64 {
        // Below about 9.2 s the attoseconds fit 64 bits: one division of 64 bits.
        if let small = Int64(exactly: attoseconds) { return small / 1_000_000_000 }
        // The components once: each reading of them divides 128 bits.
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
