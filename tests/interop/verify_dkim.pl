#!/usr/bin/env perl
# Verifies the rsa-sha256 DKIM signature of delivered messages with Mail::DKIM, as a
# receiver running it (SpamAssassin, amavis) would. Debian's Mail::DKIM has no Ed25519, so
# only the RSA signature is checked.
#
# Usage: verify_dkim.pl --dns 127.0.0.1:PORT FILE...
#
# The keys come from the DNS server at --dns (Net::DNS on that port). For each file prints
# one JSON object per line: {"item", "check": "Mail::DKIM rsa-sha256", "ok", "reason"}: exactly
# one rsa-sha256 signature, and it passes. Exits 0 when it could run the check, 2 on bad
# usage, 3 when a module is missing.
use strict;
use warnings;

BEGIN {
    for my $module (qw(Mail::DKIM::Verifier Mail::DKIM::DNS Net::DNS::Resolver JSON::PP)) {
        eval "require $module; 1" or do {
            print STDERR "verify_dkim.pl: missing Perl module $module: apt-get install libmail-dkim-perl libnet-dns-perl\n";
            exit 3;
        };
    }
}

my ($dns, @files);
while (@ARGV) {
    my $arg = shift @ARGV;
    if ($arg eq '--dns') { $dns = shift @ARGV } else { push @files, $arg }
}
if (!defined $dns || $dns !~ /^([^:]+):(\d+)$/ || !@files) {
    print STDERR "usage: verify_dkim.pl --dns HOST:PORT FILE...\n";
    exit 2;
}
my ($host, $port) = ($1, $2);
Mail::DKIM::DNS::resolver(Net::DNS::Resolver->new(
    nameservers => [$host], port => $port, recurse => 0, retry => 1,
    udp_timeout => 5, tcp_timeout => 5, searchlist => [], defnames => 0, dnsrch => 0,
));
my $json = JSON::PP->new->canonical;

for my $file (@files) {
    open(my $fh, '<:raw', $file) or die "verify_dkim.pl: $file: $!\n";
    my $raw = do { local $/; <$fh> };
    close $fh;
    my $dkim = Mail::DKIM::Verifier->new();
    $dkim->PRINT($raw);
    $dkim->CLOSE();
    my @rsa = grep { lc($_->algorithm // '') eq 'rsa-sha256' } $dkim->signatures;
    my ($ok, $reason);
    if (@rsa != 1) {
        ($ok, $reason) = (0, scalar(@rsa) . " rsa-sha256 signatures");
    } else {
        my $result = $rsa[0]->result // 'none';
        my $detail = $rsa[0]->result_detail // $result;
        ($ok, $reason) = ($result eq 'pass' ? 1 : 0, $detail);
    }
    print $json->encode({ item => $file, check => 'Mail::DKIM rsa-sha256',
        ok => $ok ? JSON::PP::true : JSON::PP::false, reason => $reason }), "\n";
}
