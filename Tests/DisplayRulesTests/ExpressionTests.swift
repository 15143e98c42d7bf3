import DisplayRules
import LiveDataTestSupport
import LiveTopics
import Testing

@Suite("Rule expressions")
struct ExpressionTests {
    static let values = LiveValues(
        domains: [
            DomainValue(
                domain: "occupancy", properties: ["nrOfPeople": "3", "capacity": "8", "note": "busy"],
                timestamp: LiveTimestamp(millisecondsSince1970: 0)),
            DomainValue(
                domain: "availability", properties: ["available": "false"],
                timestamp: LiveTimestamp(millisecondsSince1970: 0)),
            DomainValue(domain: "co2", properties: ["co2Level": "n/a"], timestamp: LiveTimestamp(millisecondsSince1970: 0)),
        ])

    @Test(
        "conditions evaluate with precedence, types and gaps",
        arguments: [
            ("nrOfPeople > 0", true),
            ("nrOfPeople > 3", false),
            ("nrOfPeople >= 3", true),
            ("nrOfPeople == 3", true),
            ("nrOfPeople == 3.0", true),
            ("nrOfPeople != 3", false),
            // A literal on the left: the comparison is turned around, not inverted.
            ("0 < nrOfPeople", true),
            ("3 >= nrOfPeople", true),
            ("4 <= nrOfPeople", false),
            ("2 > nrOfPeople", false),
            ("3 == nrOfPeople", true),
            ("3 != nrOfPeople", false),
            ("3 <= nrOfPeople and 3 >= nrOfPeople", true),
            ("nrOfPeople / capacity >= 0.375", true),
            ("nrOfPeople / capacity >= 0.8", false),
            ("1 + 2 * 3 == 7", true),
            ("(1 + 2) * 3 == 9", true),
            ("10 - 4 - 3 == 3", true),
            ("12 / 2 / 3 == 2", true),
            ("-nrOfPeople < 0", true),
            ("- -3 == 3", true),
            ("true or false and false", true),  // and binds tighter than or
            ("(true or false) and false", false),
            ("not false and false", false),  // not binds tighter than and
            ("not (false and false)", true),
            ("note == \"busy\"", true),
            ("note != 'busy'", false),
            ("availability.available == \"false\" and nrOfPeople > 0", true),
            ("availability.available == false", true),
            ("availability.available", false),
            ("not availability.available", true),
            ("occupancy.nrOfPeople == nrOfPeople", true),
            ("exists(nrOfPeople)", true),
            ("exists(temperature.temperature)", false),
            ("exists(co2.co2Level) and co2.co2Level > 1000", false),
            // Gaps: missing, non-numeric, division by zero make the comparison false.
            ("missing > 0", false),
            ("missing == 0", false),
            ("missing != 0", false),
            ("not (missing > 0)", true),
            ("co2.co2Level > 0", false),
            ("co2.co2Level < 0", false),
            ("nrOfPeople / 0 > 0", false),
            ("nrOfPeople / (capacity - 8) < 1", false),
            ("missing > 0 or nrOfPeople > 0", true),
            ("note > 1", false),
            ("1 <= 1 && 2 >= 2", true),
            ("!(1 == 2) || false", true),
        ])
    func evaluation(source: String, expected: Bool) throws {
        let expression = try CompiledExpression(source, domain: "occupancy")
        #expect(expression.evaluate(Self.values) == expected, "\(source)")
    }

    @Test("a property's text is read as the same number as the literal written in a rule")
    func numbersReadExactly() throws {
        // Values are read by a fast path; literals in rules by `Double`. They must agree to
        // the last bit, or `temperature == 21.3` could fail for a sensor sending "21.3".
        var random = SplitMix64(seed: 7)
        var texts = ["0", "-0", "7", "21.3", "0.1", "20.1", "55.6123", "123456789012345", "999999999999999", "0.000000001",
                     "12345678.1234567", "-273.15", "1e3", "1.5e-7", "12345678901234567890", "0.30000000000000004"]
        for _ in 0..<2_000 {
            let whole = String(random.next() % 10_000_000)
            let fraction = String(random.next() % 100_000_000)
            let zeros = String(repeating: "0", count: Int(random.next() % 4))
            texts.append(random.next() % 3 == 0 ? whole : "\(random.next() % 2 == 0 ? "-" : "")\(whole).\(zeros)\(fraction)")
        }
        for text in texts {
            let condition = try CompiledExpression("x == \(text)", domain: "d")
            let values = LiveValues(domains: [
                DomainValue(domain: "d", properties: ["x": text], timestamp: LiveTimestamp(millisecondsSince1970: 0))
            ])
            #expect(condition.evaluate(values), "\(text)")
        }
        // Other spellings Double reads, and text that is no finite number.
        func values(_ text: String) -> LiveValues {
            LiveValues(domains: [DomainValue(domain: "d", properties: ["x": text], timestamp: LiveTimestamp(millisecondsSince1970: 0))])
        }
        for (text, number) in [("+5", "5"), ("5.", "5"), (".5", "0.5"), ("-.5", "-0.5"), ("1e3", "1000"), ("0x10", "16")] {
            #expect(try CompiledExpression("x == \(number)", domain: "d").evaluate(values(text)), "\(text)")
        }
        for text in ["true", "busy", "inf", "-inf", "nan", " 5", "5 ", "", "-", "."] {
            #expect(try !CompiledExpression("x > 0 or x <= 0", domain: "d").evaluate(values(text)), "\(text.debugDescription)")
        }
    }

    @Test(
        "mistakes are refused at load with the column",
        arguments: [
            ("", "column 1: the condition is empty"),
            ("nrOfPeople >", "column 13: the condition ends too early"),
            ("nrOfPeople > > 1", "column 14: unexpected '>'"),
            ("nrOfPeople = 1", "column 12: '=' is not an operator; compare with '=='"),
            ("nrOfPeople > 0 nrOfPeople", "column 16: unexpected 'nrOfPeople'"),
            ("(nrOfPeople > 0", "column 16: expected ')' to close the '(' at column 1"),
            ("note == \"busy", "column 9: the string is not closed by \""),
            ("nrOfPeople + 1", "column 1: a condition must be true or false, not a number (compare it, e.g. nrOfPeople > 0)"),
            ("\"busy\"", "column 1: a condition must be true or false, not a string (compare it, e.g. nrOfPeople > 0)"),
            ("note < \"x\"", "column 6: '<' compares numbers, not strings"),
            ("true > false", "column 6: '>' compares numbers, not booleans"),
            ("1 == \"1\"", "column 3: '==' cannot compare a number with a string"),
            ("\"a\" + 1 > 0", "column 5: '+' works on numbers, not a string"),
            ("count(x) > 1", "column 1: unknown function 'count' (the one function is exists)"),
            ("exists nrOfPeople", "column 8: exists needs a property in parentheses: exists(co2Level)"),
            ("a.b.c > 1", "column 1: \"a.b.c\" is not a property name (write name or domain.name)"),
            ("nrOfPeople > 1 and", "column 19: the condition ends too early"),
            ("nrOfPeople # 1", "column 12: unexpected character '#'"),
            (String(repeating: "(", count: 40) + "x > 1" + String(repeating: ")", count: 40), "column 33: the condition nests deeper than 32 levels"),
            (String(repeating: "not ", count: 100_000) + "x > 1", "column 1: the condition is longer than 4096 characters"),
            (String(repeating: "not ", count: 33) + "x > 1", "column 129: the condition nests deeper than 32 levels"),
            ("x > " + String(repeating: "-", count: 40) + "1", "column 37: the condition nests deeper than 32 levels"),
        ])
    func errors(source: String, message: String) {
        #expect {
            try CompiledExpression(source, domain: "occupancy")
        } throws: { error in
            (error as? ExpressionError)?.description == message
        }
    }

    @Test("nesting up to the bound still parses and evaluates")
    func deepButAllowed() throws {
        let source = String(repeating: "(", count: 32) + "x > 1" + String(repeating: ")", count: 32)
        let values = LiveValues(domains: [DomainValue(domain: "d", properties: ["x": "2"], timestamp: LiveTimestamp(millisecondsSince1970: 0))])
        #expect(try CompiledExpression(source, domain: "d").evaluate(values))
    }

    @Test("references lists what a condition reads, resolved to domains")
    func references() throws {
        let expression = try CompiledExpression("availability.available == \"false\" and nrOfPeople > 0", domain: "occupancy")
        #expect(
            expression.references == [
                PropertyReference(domain: "availability", name: "available"),
                PropertyReference(domain: "occupancy", name: "nrOfPeople"),
            ])
    }

    @Test("label templates render properties, qualified names, braces and gaps")
    func labelTemplates() throws {
        let template = try LabelTemplate("{nrOfPeople}/{capacity} {{free: {availability.available}}} {missing}!", domain: "occupancy")
        #expect(template.render { Self.values[$0] } == "3/8 {free: false} !")
        #expect(try LabelTemplate("Boardroom", domain: nil).isConstant)
        #expect(throws: ExpressionError(message: "'{' is not closed by '}'", column: 4)) {
            try LabelTemplate("ab {x", domain: nil)
        }
        #expect(throws: ExpressionError(message: "'}' without '{' (write '}}' for a literal brace)", column: 2)) {
            try LabelTemplate("a}", domain: nil)
        }
    }
}
